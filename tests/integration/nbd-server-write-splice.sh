#!/bin/bash
# WRITE payloads on plain sockets go socket -> pipe -> file by splice, not through the
# server's memory; with --no-zero-copy they go through memory. Either way the file
# holds exactly what real clients wrote: nbdcopy over Unix and TCP sockets, FUA writes
# from qemu-io and nbdsh, and, as root, writes that run into a full disk. The server
# runs under strace, which logs its splice() calls (its other file I/O goes through
# io_uring and does not show there).
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
  wait_listening "$listen" "$TRACER_PID"
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

# Bytes that splice() calls moved: the server's only splice() system calls are the
# socket -> pipe ones (its other splices go through io_uring). A call that strace saw
# interrupted by another thread's ends on a "<... splice resumed>" line.
spliced_from_socket() {
  awk '/splice/ && / = [0-9]+$/ { n += $NF } END { print n + 0 }' "$WORK/trace"
}

# copy_in NAME LISTEN_URI CLIENT_URI SERVER_FLAGS NBDCOPY_FLAGS: a fresh export, the
# image written into it by nbdcopy with the server under strace, then compared; sets
# MOVED to the bytes spliced from the socket.
copy_in() {
  local name=$1 listen=$2 uri=$3 server_flags=$4 nbdcopy_flags=$5
  rm -f "$WORK/disk.img" && truncate -s "$SIZE" "$WORK/disk.img"
  # shellcheck disable=SC2086 # the flags are word lists
  start_traced "$listen" --export disk="$WORK/disk.img" $server_flags
  # shellcheck disable=SC2086
  nbdcopy $nbdcopy_flags "$WORK/src.img" "$uri" || die "nbdcopy -> sluice ($name)"
  stop_traced
  cmp "$WORK/src.img" "$WORK/disk.img" || die "the export differs after nbdcopy ($name)"
  MOVED=$(spliced_from_socket)
}

# Each request's first bytes arrive with its header and are copied, and a request whose
# payload came in too many small pieces for one pipe goes through memory (a slow
# server, as under ASan, sees more of those); the bulk must still be spliced.
copy_in "Unix socket, 4 connections" "unix://$SOCK" "nbd+unix:///disk?socket=$SOCK" "" ""
[ "$MOVED" -ge $((8 << 20)) ] || die "only $MOVED bytes were spliced from the socket (48 MiB written)"
pass "nbdcopy over a Unix socket: identical, $MOVED bytes spliced socket -> pipe"

copy_in "TCP, 1 connection" "tcp://127.0.0.1:$PORT" "nbd://127.0.0.1:$PORT/disk" "" "--connections=1 --requests=64"
[ "$MOVED" -ge $((8 << 20)) ] || die "only $MOVED bytes were spliced from the socket over TCP"
pass "nbdcopy over TCP: identical, $MOVED bytes spliced socket -> pipe"

# --no-zero-copy: the same bytes, none of them spliced.
copy_in "--no-zero-copy" "unix://$SOCK" "nbd+unix:///disk?socket=$SOCK" "--no-zero-copy" ""
[ "$MOVED" -eq 0 ] || die "--no-zero-copy still spliced from the socket"
pass "--no-zero-copy: identical, nothing spliced"

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
  nbdsh -u "nbd+unix:///disk?socket=$SOCK" -c '
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
print("ok: %d blocks fitted, then %s" % (len(written), failed))
' || die "full disk"
  stop_traced
  [ "$(spliced_from_socket)" -gt 0 ] || die "the full-disk writes were not spliced"
  pass "a full disk answers ENOSPC to spliced writes and the connection goes on"
else
  echo "note: not root or no tmpfs mount: full-disk case skipped"
fi
echo "all passed"
