#!/bin/bash
# WRITE payloads on plain sockets go socket -> pipe -> file by splice, not through the
# server's memory; with --no-zero-copy they go through memory. Either way the file
# holds exactly what real clients wrote: nbdcopy over Unix and TCP sockets, FUA writes
# from qemu-io and nbdsh, and, as root, writes that run into a full disk. The server
# runs under strace, which logs its splice() calls (its other file I/O goes through
# io_uring and does not show there): socket -> pipe always, and pipe -> file only for
# an export on tmpfs, where that splice is made on the loop's thread.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdsh qemu-io strace

SIZE=64M
export WORK
SOCK="$WORK/nbd.sock"
PORT=$(free_port)
head -c 48M /dev/urandom >"$WORK/src.img"
truncate -s "$SIZE" "$WORK/src.img"

# start_traced LISTEN_URI ARGS...: the server under strace -f; sets TRACER_PID and
# SERVER_PID (strace's child).
start_traced() {
  local listen=$1
  shift
  case $listen in unix://*) rm -f "${listen#unix://}" ;; esac
  rm -f "$WORK/trace"
  # LeakSanitizer cannot work under ptrace (an ASan build would fail at exit for that).
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -e trace=splice -o "$WORK/trace" \
    "$SLUICE" serve --protocol nbd --listen "$listen" "$@" >>"$WORK/server.log" 2>&1 &
  TRACER_PID=$!
  PIDS+=("$TRACER_PID")
  wait_listening "$listen" "$TRACER_PID" || die "the server is not listening on $listen"
  SERVER_PID=$(pgrep -P "$TRACER_PID")
  [ -n "$SERVER_PID" ] || die "no server under strace"
  # strace ignores SIGTERM while it runs a program: the cleanup must stop the server.
  PIDS+=("$SERVER_PID")
}

# stop_traced: SIGTERM to the server; strace exits with its status, which must be 0.
stop_traced() {
  kill -TERM "$SERVER_PID"
  local status=0
  wait "$TRACER_PID" || status=$?
  [ "$status" -eq 0 ] || die "the server exited with status $status after SIGTERM"
}

# spliced KIND: bytes that the server's splice() system calls moved, KIND "socket"
# (socket -> pipe: no offset on either side) or "file" (pipe -> file: an offset into
# the file). Its other splices go through io_uring and do not show. A call that strace
# saw interrupted by another thread's ends on a "<... splice resumed>" line of the same
# thread, which takes the kind of that thread's unfinished call.
spliced() {
  awk -v want="$1" '
    { pid = $1 }
    /splice\(/ {
      kind = ($0 ~ /splice\([0-9]+, NULL, [0-9]+, \[/) ? "file" : "socket"
      if (/unfinished/) pending[pid] = kind
    }
    /resumed>/ { kind = pending[pid] }
    / = [0-9]+$/ && kind == want { n += $NF }
    END { print n + 0 }' "$WORK/trace"
}
spliced_from_socket() { spliced socket; }

# trace_summary: the splice calls in the trace by outcome, and the server's log, for a
# failure message.
trace_summary() {
  echo "strace saw $(grep -c 'splice(' "$WORK/trace") splice calls" \
    "($(grep -c ' = -1 ' "$WORK/trace") failed: $(grep -o ' = -1 [A-Z]*' "$WORK/trace" | sort | uniq -c | tr -s ' \n' ' '))," \
    "$(spliced socket) bytes socket -> pipe, $(spliced file) pipe -> file; server log: $(tail -n 5 "$WORK/server.log")"
}

# copy_in NAME LISTEN_URI CLIENT_URI SERVER_FLAGS NBDCOPY_FLAGS [EXPORT_DIR]: a fresh
# export (in $WORK unless EXPORT_DIR), the image written into it by nbdcopy with the
# server under strace, then compared; sets MOVED to the bytes spliced from the socket
# and INTO_FILE to those spliced into the file on the loop's thread.
copy_in() {
  local name=$1 listen=$2 uri=$3 server_flags=$4 nbdcopy_flags=$5 dir=${6:-$WORK}
  rm -f "$dir/disk.img" && truncate -s "$SIZE" "$dir/disk.img"
  # shellcheck disable=SC2086 # the flags are word lists
  start_traced "$listen" --export disk="$dir/disk.img" $server_flags
  # shellcheck disable=SC2086
  nbdcopy $nbdcopy_flags "$WORK/src.img" "$uri" || die "nbdcopy -> sluice ($name)"
  stop_traced
  cmp "$WORK/src.img" "$dir/disk.img" || die "the export differs after nbdcopy ($name)"
  MOVED=$(spliced_from_socket)
  INTO_FILE=$(spliced file)
}

# Each request's first bytes arrive with its header and are copied, and a request whose
# payload came in too many small pieces for one pipe goes through memory (a slow
# server, as under ASan, sees more of those); the bulk must still be spliced.
copy_in "Unix socket, 4 connections" "unix://$SOCK" "nbd+unix:///disk?socket=$SOCK" "" ""
[ "$MOVED" -ge $((8 << 20)) ] || die "only $MOVED bytes were spliced from the socket (48 MiB written)"
# An export on a disk: its pipe -> file splices must go through the ring's workers,
# where a write that waits on the disk cannot stall the loop. ($WORK is normally
# /var/tmp; SLUICE_TEST_DIR may put it on tmpfs, where the rule is the other one.)
case $(stat -f -c %T "$WORK") in
  tmpfs | ramfs) echo "note: $WORK is on tmpfs: the disk export case is not checked" ;;
  *) [ "$INTO_FILE" -eq 0 ] || die "$INTO_FILE bytes were spliced into a file not on tmpfs on the loop's thread" ;;
esac
pass "nbdcopy over a Unix socket: identical, $MOVED bytes spliced socket -> pipe"

copy_in "TCP, 1 connection" "tcp://127.0.0.1:$PORT" "nbd://127.0.0.1:$PORT/disk" "" "--connections=1 --requests=64"
[ "$MOVED" -ge $((8 << 20)) ] || die "only $MOVED bytes were spliced from the socket over TCP"
pass "nbdcopy over TCP: identical, $MOVED bytes spliced socket -> pipe"

# --no-zero-copy: the same bytes, none of them spliced.
copy_in "--no-zero-copy" "unix://$SOCK" "nbd+unix:///disk?socket=$SOCK" "--no-zero-copy" ""
[ "$MOVED" -eq 0 ] || die "--no-zero-copy still spliced from the socket"
pass "--no-zero-copy: identical, nothing spliced"

# An export on tmpfs: the pipe -> file splices are made on the loop's thread (about
# as many bytes as came from the socket, every spliced payload).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/mem" && mount -t tmpfs -o size=80M tmpfs "$WORK/mem" 2>/dev/null; then
  MOUNTS+=("$WORK/mem")
  copy_in "export on tmpfs" "unix://$SOCK" "nbd+unix:///disk?socket=$SOCK" "" "" "$WORK/mem"
  [ "$MOVED" -ge $((8 << 20)) ] || die "only $MOVED bytes were spliced from the socket (export on tmpfs)"
  [ "$INTO_FILE" -ge $((8 << 20)) ] || die "only $INTO_FILE bytes were spliced into the tmpfs export on the loop"
  pass "an export on tmpfs: identical, $INTO_FILE bytes spliced pipe -> file on the loop's thread"
else
  echo "note: not root or no tmpfs mount: the tmpfs export case skipped"
fi

# FUA writes (qemu-io -f, nbdsh with CMD_FLAG_FUA) land where they should, over TCP.
start_traced "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img"
qemu-io -f raw -c 'write -f -P 0x3c 4M 256k' -c 'read -P 0x3c 4M 256k' "nbd://127.0.0.1:$PORT/disk" >/dev/null ||
  die "qemu-io FUA write"
nbdsh -u "nbd://127.0.0.1:$PORT/disk" -c '
import os
data = os.urandom(300 * 1024 + 5)
h.pwrite(data, 9 * 1024 * 1024 + 512, nbd.CMD_FLAG_FUA)
assert h.pread(len(data), 9 * 1024 * 1024 + 512) == data
open(os.environ["WORK"] + "/fua.bin", "wb").write(data)
' || die "nbdsh FUA write"
stop_traced
python3 - "$WORK" <<'PY' || die "the FUA writes are not in the file"
import sys
work = sys.argv[1]
disk = open(work + "/disk.img", "rb").read()
assert disk[4 << 20:(4 << 20) + (256 << 10)] == b"\x3c" * (256 << 10), "qemu-io's FUA write"
data = open(work + "/fua.bin", "rb").read()
start = 9 * 1024 * 1024 + 512
assert disk[start:start + len(data)] == data, "nbdsh's FUA write"
PY
[ "$(spliced_from_socket)" -gt 0 ] || die "the FUA writes were not spliced"
pass "FUA writes from qemu-io and nbdsh are in the file"

# A full disk: spliced writes fail with ENOSPC, the acknowledged ones stay, and the
# connection goes on (a 1 MiB tmpfs under a 16 MiB sparse file).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/full" && mount -t tmpfs -o size=1M tmpfs "$WORK/full" 2>/dev/null; then
  MOUNTS+=("$WORK/full")
  truncate -s 16M "$WORK/full/disk.img"
  start_traced "unix://$SOCK" --export disk="$WORK/full/disk.img"
  FITTED=$(nbdsh -u "nbd+unix:///disk?socket=$SOCK" -c '
import errno
block = 256 * 1024
written = []
failed = None
for i in range(16):
    data = bytes([i + 1]) * block
    try:
        h.pwrite(data, i * block)
        written.append(i)
    except nbd.Error as e:
        failed = e
        break
assert failed is not None, "16 MiB fitted on a 1 MiB disk"
assert failed.errnum == errno.ENOSPC, "not ENOSPC: %r" % failed
assert written, "nothing fitted at all"
for i in written:
    assert h.pread(block, i * block) == bytes([i + 1]) * block, "acknowledged block %d changed" % i
h.trim(16 * 1024 * 1024, 0)
h.pwrite(b"s" * block, 0)
assert h.pread(block, 0) == b"s" * block
h.flush()
print(len(written))
') || die "full disk"
  stop_traced
  # Every payload went socket -> pipe -> file: the blocks that fitted, the one after
  # the hole was punched, and the one that failed, whose splice into the file met the
  # full disk. (A payload that the server wrongly took for too fragmented for its
  # pipe went through memory: that made this flaky before.)
  [ "$(spliced file)" -ge $(((FITTED + 1) * 256 * 1024)) ] ||
    die "not every full-disk write was spliced into the file ($FITTED blocks fitted); $(trace_summary)"
  grep -q 'splice(.* = -1 ENOSPC' "$WORK/trace" ||
    die "the write that did not fit did not fail in its splice; $(trace_summary)"
  pass "a full disk answers ENOSPC to spliced writes ($FITTED blocks fitted) and the connection goes on"
else
  echo "note: not root or no tmpfs mount: full-disk case skipped"
fi
echo "all passed"
