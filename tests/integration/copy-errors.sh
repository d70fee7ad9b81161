#!/bin/bash
# Every error path of sluice copy: a clear one-line message, exit 1 for transfer
# errors and 2 for usage errors, never a crash or a hang, and nothing clobbered.
. "$(dirname "$0")/functions.sh"
requires timeout truncate

# one_clear_line: the failure was reported as a single "sluice: ..." line, not a crash.
one_clear_line() {
  [[ $(wc -l <<<"$err") -eq 1 && $err == "sluice: "* ]] || fail "expected one 'sluice: ...' line, got: $err"
  [[ $err != *"internal error"* ]] || fail "an internal error: $err"
}

random_file "$scratch/src" 4M

log "nonexistent source"
expect_fail 1 "$scratch/no-such-file: No such file or directory" \
  "$SLUICE" copy "$scratch/no-such-file" "$scratch/dst"
one_clear_line
[[ ! -e $scratch/dst ]] || fail "a copy from a missing source created its destination"
expect_fail 1 "$scratch/no-such-file: No such file or directory" \
  "$SLUICE" copy "file://$scratch/no-such-file" null:

log "a directory and a character device as the source"
expect_fail 1 "$scratch: not a regular file or block device" "$SLUICE" copy "$scratch" "$scratch/dst"
one_clear_line
expect_fail 1 "/dev/zero: not a regular file or block device" "$SLUICE" copy /dev/zero "$scratch/dst"
one_clear_line
[[ ! -e $scratch/dst ]] || fail "a copy from a bad source created its destination"

log "a FIFO as the source, the destination, and for info: refused at once, no hang"
mkfifo "$scratch/fifo"
expect_fail 1 "$scratch/fifo: not a regular file or block device" timeout 20 "$SLUICE" copy "$scratch/fifo" "$scratch/dst"
one_clear_line
expect_fail 1 "$scratch/fifo: not a regular file or block device" timeout 20 "$SLUICE" copy "$scratch/src" "$scratch/fifo"
one_clear_line
expect_fail 1 "$scratch/fifo: not a regular file or block device" timeout 20 "$SLUICE" info "$scratch/fifo"
one_clear_line
[[ ! -e $scratch/dst ]] || fail "a copy from a FIFO created its destination"

log "files of /proc and /sys: refused, not copied by a size that is not their content"
# /proc/cpuinfo says 0 bytes; copied by that, it became an empty image and exit 0.
expect_fail 1 "/proc/cpuinfo: a file of the kernel's proc filesystem, whose size is not its content" \
  "$SLUICE" copy /proc/cpuinfo "$scratch/cpuinfo.img"
one_clear_line
[[ ! -e $scratch/cpuinfo.img ]] || fail "a refused /proc source created its destination"
if [[ -e /sys/devices/system/cpu/online ]]; then  # sysfs says 4096 bytes
  expect_fail 1 "a file of the kernel's sysfs filesystem" "$SLUICE" info /sys/devices/system/cpu/online
fi
expect_fail 1 "/proc/self/comm: a file of the kernel's proc filesystem" "$SLUICE" copy "$scratch/src" /proc/self/comm

log "a file name with a colon is a file, not a URI"
cp "$scratch/src" "$scratch/vm:disk.img"
(cd "$scratch" && expect_ok "$SLUICE" copy "vm:disk.img" "copy:of.img")
same_content "$scratch/src" "$scratch/copy:of.img"
rm -f "$scratch/vm:disk.img" "$scratch/copy:of.img"

log "--help and --version: on stdout, exit 0"
for help in "--help" "copy --help" "info --help" "serve --help"; do
  # shellcheck disable=SC2086 # the command and its flag are two words
  expect_ok "$SLUICE" $help
  [[ -n $out && -z $err ]] || fail "'sluice $help' wrote to stderr or nothing to stdout: $err"
done
expect_ok "$SLUICE" --help
for command in copy info serve; do [[ $out == *"$command"* ]] || fail "--help does not name '$command': $out"; done
expect_ok "$SLUICE" copy --help
for option in --depth --request-size --sparse= --direct --progress --stats --prezeroed --no-flush; do
  [[ $out == *"$option"* ]] || fail "copy --help does not document $option: $out"
done
expect_ok "$SLUICE" --version
version=$(sed -n "s/^ *version : '\\(.*\\)',\$/\\1/p" "$SOURCE_ROOT/meson.build" | head -n 1)
[[ -n $version && $out == "sluice $version" ]] || fail "--version printed '$out', meson.build says '$version'"

log "endpoints the command line got wrong: usage errors (exit 2), nothing opened"
# Each is refused before either end is touched: a destination file named first is not
# created, and a malformed destination does not wait for a source's server.
expect_usage() {  # expect_usage MESSAGE ARGS...: exit 2, MESSAGE, then the hint
  local message=$1
  shift
  expect_fail 2 "$message" "$SLUICE" "$@"
  [[ $err == *"Try 'sluice $1 --help'."* ]] || fail "'sluice $*': no usage hint: $err"
}
expect_usage "unsupported source 'nbdx://host/e'" copy nbdx://host/e "$scratch/never"
expect_usage "'tcp://127.0.0.1:1' can only be a destination: Chunked and raw streams are received with \`sluice serve\` (an NBD server there is a source with --protocol nbd)" \
  copy tcp://127.0.0.1:1 "$scratch/never"
expect_usage "null: takes nothing after the colon" copy "$scratch/src" null:foo
expect_usage "unsupported destination 'bogus://x'" copy "$scratch/src" bogus://x
expect_usage "invalid URI 'nbd://[::1': unterminated IPv6 address" copy "$scratch/src" "nbd://[::1"
expect_usage "tcp://example.invalid needs a port: tcp://HOST:PORT" copy "$scratch/src" tcp://example.invalid
expect_usage "unix:// needs a socket path: unix:///PATH" copy "$scratch/src" unix://
expect_usage "--protocol nbd is not available here" copy --protocol nbd "$scratch/src" https://example.invalid/import
# A source that would hang on a silent server is never opened when the destination is wrong.
expect_usage "null: takes nothing after the colon" copy nbd://192.0.2.1/ null:foo
expect_usage "unsupported source 'gopher://x/y'" info gopher://x/y
expect_usage "'file://otherhost$scratch/never' names a file on another machine" copy "$scratch/src" "file://otherhost$scratch/never"
expect_usage "the path '/a b' has spaces or control characters" copy "$scratch/src" "http://127.0.0.1:1/a b"
expect_usage "--size must not be 0" serve --listen "unix://$scratch/never.sock" --output "$scratch/never" --size 0
expect_usage "--output null: keeps nothing and so has no size" serve --listen "unix://$scratch/never.sock" --output null:

log "options the endpoints would ignore: usage errors, not a silently plaintext link"
# TLS options with no TLS endpoint used to be dropped without a word: the copy ran in
# plain text while the user believed it verified and encrypted.
expect_usage "the --tls-* options are for tls://, https://, nbds:// and nbds+unix:// endpoints; none is given" \
  copy --tls-ca "$scratch/src" "$scratch/src" tcp://127.0.0.1:1
expect_usage "none is given, so nothing would be encrypted" copy --tls-no-verify "$scratch/src" nbd://127.0.0.1:1/x
expect_usage "none is given, so nothing would be encrypted" info --tls12 nbd://127.0.0.1:1/x
serve=(serve --listen "unix://$scratch/never.sock")
expect_usage "the --tls-* options need a tls:// listener: unix://$scratch/never.sock is plaintext" \
  "${serve[@]}" --output "$scratch/never" --size 1M --tls-cert "$scratch/src"
expect_usage "a tls:// listener needs --tls-cert and --tls-key, or --tls-psk-file" \
  serve --listen tls://127.0.0.1:1 --output "$scratch/never" --size 1M
expect_usage "--tls=off is NBD's STARTTLS policy" "${serve[@]}" --output "$scratch/never" --size 1M --tls=off
expect_usage "--read-only is for --protocol nbd" "${serve[@]}" --output "$scratch/never" --size 1M --read-only
expect_usage "--size is for chunked and raw" "${serve[@]}" --protocol nbd --export "d=$scratch/src" --size 1M
expect_usage "--progress is for chunked and raw" "${serve[@]}" --protocol nbd --export "d=$scratch/src" --progress
expect_usage "--idle-timeout is for chunked and raw" \
  "${serve[@]}" --protocol nbd --export "d=$scratch/src" --idle-timeout 5
expect_usage "shape TLS, which needs --tls-cert or --tls-psk-file" \
  "${serve[@]}" --protocol nbd --export "d=$scratch/src" --tls-ca "$scratch/src"

log "serve: an output that cannot hold --size fails at start, not when a sender connects"
expect_fail 1 "the image (9223372036854775808 bytes) is larger than any file can be" \
  timeout 20 "$SLUICE" "${serve[@]}" --output "$scratch/huge" --size 8E
one_clear_line
[[ ! -e $scratch/never.sock ]] || fail "a refused serve listened"
# Past what the clock can add, a deadline fired at once ("stalled for ... seconds").
expect_usage "--timeout: '9223372036854' is too large (at most 3153600000 seconds)" \
  copy --timeout 9223372036854 "$scratch/src" null:
expect_usage "--idle-timeout: '18446744073709551615' is too large" \
  serve --listen "unix://$scratch/never.sock" --output null: --size 1M --idle-timeout 18446744073709551615
expect_ok "$SLUICE" copy "$scratch/src" "file://localhost$scratch/local.copy"
same_content "$scratch/src" "$scratch/local.copy"
[[ ! -e $scratch/never ]] || fail "a refused copy created its destination"

log "progress of a copy that failed never says 100%"
expect_fail 1 "No such file or directory" "$SLUICE" copy --progress=json "$scratch/no-such-file" null:
last=$(grep '"final":true' <<<"$err")
assert_eq "percent of a copy that could not start" "$(json_field "$last" percent)" 0

log "unreadable source, unwritable destination"
chmod 600 "$scratch/src"
if [[ $(id -u) -eq 0 ]]; then
  # root reads anything: drop to nobody. It must reach the file through $scratch.
  chmod 755 "$scratch"
  if command -v setpriv >/dev/null; then
    as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  else
    as_nobody=(runuser -u nobody --)
  fi
  "${as_nobody[@]}" "$SLUICE" --version >/dev/null 2>&1 ||
    skip "user nobody cannot run $SLUICE (a build directory it cannot reach?)"
  expect_fail 1 "$scratch/src: Permission denied" "${as_nobody[@]}" "$SLUICE" copy "$scratch/src" null:
  one_clear_line
  expect_fail 1 "$scratch/unwritable: Permission denied" \
    "${as_nobody[@]}" "$SLUICE" copy "$SLUICE" "$scratch/unwritable"
  one_clear_line
  chmod 700 "$scratch"
else
  chmod 000 "$scratch/src"
  expect_fail 1 "$scratch/src: Permission denied" "$SLUICE" copy "$scratch/src" null:
  one_clear_line
  chmod 600 "$scratch/src"
fi

log "destination in a nonexistent directory, destination a directory"
expect_fail 1 "$scratch/no-dir/dst: No such file or directory" \
  "$SLUICE" copy "$scratch/src" "$scratch/no-dir/dst"
one_clear_line
mkdir "$scratch/a-dir"
expect_fail 1 "$scratch/a-dir" "$SLUICE" copy "$scratch/src" "$scratch/a-dir"
one_clear_line

log "source and destination are the same file"
cp "$scratch/src" "$scratch/src.orig"
ln "$scratch/src" "$scratch/src.hardlink"
ln -s "$scratch/src" "$scratch/src.symlink"
for dst in "$scratch/src" "file://$scratch/src" "$scratch/src.hardlink" "$scratch/src.symlink"; do
  expect_fail 1 "the source and the destination are the same file" "$SLUICE" copy "$scratch/src" "$dst"
  one_clear_line
  same_content "$scratch/src.orig" "$scratch/src"
done
expect_fail 1 "the source and the destination are the same file" \
  "$SLUICE" copy "$scratch/src.symlink" "file://$scratch/src"
same_content "$scratch/src.orig" "$scratch/src"

log "usage errors exit 2 and touch nothing"
expect_fail 2 "unknown or incomplete option '--no-such-option'" \
  "$SLUICE" copy --no-such-option "$scratch/src" "$scratch/dst"
expect_fail 2 "copy needs a SOURCE and a DESTINATION" "$SLUICE" copy "$scratch/src"
expect_fail 2 "copy needs a SOURCE and a DESTINATION" "$SLUICE" copy
expect_fail 2 "copy takes one SOURCE and one DESTINATION; unexpected argument 'extra'" \
  "$SLUICE" copy "$scratch/src" "$scratch/dst" extra
expect_fail 2 "unknown or incomplete option '--no-such-option'" \
  "$SLUICE" copy "$scratch/src" "$scratch/dst" --no-such-option
expect_fail 2 "--request-size: invalid size '3x'" "$SLUICE" copy --request-size 3x "$scratch/src" "$scratch/dst"
expect_fail 2 "--request-size" "$SLUICE" copy --request-size 1000 "$scratch/src" "$scratch/dst"
expect_fail 2 "--depth must be between 1 and 1024" "$SLUICE" copy --depth 0 "$scratch/src" "$scratch/dst"
expect_fail 2 "--depth" "$SLUICE" copy --depth -3 "$scratch/src" "$scratch/dst"
expect_fail 2 "--sparse" "$SLUICE" copy --sparse=100 "$scratch/src" "$scratch/dst"
expect_fail 2 "--sparse must be 0 (off) or a multiple of 512" "$SLUICE" copy --sparse=513 "$scratch/src" "$scratch/dst"
expect_fail 2 "--depth: '1k' is not a whole number" "$SLUICE" copy --depth 1k "$scratch/src" "$scratch/dst"
expect_fail 2 "--depth: '2.0' is not a whole number" "$SLUICE" copy --depth 2.0 "$scratch/src" "$scratch/dst"
expect_fail 2 "SOURCE and DESTINATION must not be empty" "$SLUICE" copy "$scratch/src" ""
expect_fail 2 "SOURCE must not be empty" "$SLUICE" info ""
expect_fail 2 "unknown or incomplete option '--depth'" "$SLUICE" copy --depth
expect_fail 2 "unknown command 'copi'" "$SLUICE" copi "$scratch/src" "$scratch/dst"
[[ ! -e $scratch/dst ]] || fail "a usage error created the destination"

# --- slow copies: shrinking source, SIGINT -----------------------------------------

# slow_source SIZE: a file of real (allocated) data, which a copy at depth 1 with 4k
# requests takes a while to read.
slow_source() {
  rm -f "$scratch/slow"
  head -c "$1" /dev/zero >"$scratch/slow"
}
slow_copy_options=(--depth 1 --request-size 4k)

# wait_or_hang PID SECONDS: the process must end within SECONDS; its status in $status.
wait_or_hang() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS > deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      fail "sluice (pid $pid) hung"
    fi
    sleep 0.1
  done
  status=0
  wait "$pid" || status=$?
}

# expect_shrink_noticed OPTION...: a copy to null: with these options, whose source is
# cut short under it, fails saying so; tries larger sources until one is still running.
expect_shrink_noticed() {
  local shrink_checked=false size
  for size in 1G 2G 4G; do
    slow_source "$size"
    "$SLUICE" copy "$@" "$scratch/slow" null: 2>"$scratch/stderr" &
    pid=$!
    on_exit "kill -KILL $pid"
    wait_until_open "$pid" "$scratch/slow" || true
    # Cut it far below where the copy has got to, so the very next read meets the
    # new end: how long the rest would take (minutes under ASan) does not matter.
    truncate -s 1M "$scratch/slow"
    running=false
    kill -0 "$pid" 2>/dev/null && running=true
    wait_or_hang "$pid" 60
    err=$(cat "$scratch/stderr")
    if [[ $status -eq 0 ]]; then
      # Done before the truncation could be seen: only then may it succeed.
      $running && fail "the source shrank during the copy, yet it succeeded"
      log "a $size copy finished before the source shrank; trying a larger one"
      continue
    fi
    assert_eq "exit status after the source shrank ($*)" "$status" 1
    [[ $err == *shrank* ]] || fail "the error does not say the source shrank ($*): $err"
    one_clear_line
    shrink_checked=true
    break
  done
  $shrink_checked || fail "could not make a copy slow enough to shrink its source ($*)"
}

log "a source that shrinks during the copy"
expect_shrink_noticed "${slow_copy_options[@]}"
log "a source that shrinks during a copy in two lanes"
expect_shrink_noticed --depth 2 --lanes 2 --request-size 4k

log "SIGINT and SIGTERM during a copy"
for signal in INT TERM; do
  checked=false
  for size in 1G 2G 4G; do
    [[ $(size_of "$scratch/slow" 2>/dev/null || echo 0) -eq $(to_bytes "$size") ]] || slow_source "$size"
    rm -f "$scratch/slow.copy"
    "$SLUICE" copy "${slow_copy_options[@]}" "$scratch/slow" "$scratch/slow.copy" 2>"$scratch/stderr" &
    pid=$!
    on_exit "kill -KILL $pid"
    wait_until_open "$pid" "$scratch/slow" || true
    if ! kill "-$signal" "$pid" 2>/dev/null; then
      wait "$pid" || fail "sluice failed before it was interrupted: $(cat "$scratch/stderr")"
      log "a $size copy finished before SIG$signal; trying a larger one"
      continue
    fi
    wait_or_hang "$pid" 30
    err=$(cat "$scratch/stderr")
    if [[ $status -eq 0 && -z $err ]] && cmp -s "$scratch/slow" "$scratch/slow.copy"; then
      log "a $size copy finished as SIG$signal arrived; trying a larger one"
      continue
    fi
    assert_eq "exit status after SIG$signal" "$status" 1
    [[ $err == *cancelled* ]] || fail "SIG$signal: the error does not say cancelled: $err"
    one_clear_line
    checked=true
    break
  done
  $checked || fail "could not make a copy slow enough to interrupt"
done
rm -f "$scratch/slow" "$scratch/slow.copy"

log "SIGINT while sending to a slow receiver: cancelled, not blamed on the receiver"
# The cancel closes the socket under the send, whose "Broken pipe" used to be the
# error: "the receiver closed the connection ... its log says why".
random_file "$scratch/stream.img" 64M
rm -f "$scratch/slow.sock" "$scratch/slow.accepted"
"$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept()
open(sys.argv[2], "w").close()
while c.recv(65536):
    time.sleep(0.05)
' "$scratch/slow.sock" "$scratch/slow.accepted" &
receiver_pid=$!
on_exit "kill -KILL $receiver_pid"
for _ in $(seq 200); do [[ -S $scratch/slow.sock ]] && break; sleep 0.05; done
"$SLUICE" copy "$scratch/stream.img" "unix://$scratch/slow.sock" 2>"$scratch/stderr" &
pid=$!
on_exit "kill -KILL $pid"
for _ in $(seq 200); do [[ -e $scratch/slow.accepted ]] && break; sleep 0.05; done
sleep 0.5  # data flowing, the socket full
kill -INT "$pid"
wait_or_hang "$pid" 30
err=$(cat "$scratch/stderr")
assert_eq "exit status after SIGINT while sending" "$status" 1
assert_eq "the error after SIGINT while sending" "$err" "sluice: the transfer was cancelled"
rm -f "$scratch/stream.img"

log "a destination over the file-size limit (ulimit -f): an error, the old contents kept"
# It used to die of SIGXFSZ (exit 153, no message) after emptying the destination.
random_file "$scratch/over-limit" 20M
random_file "$scratch/kept" 8M
cp "$scratch/kept" "$scratch/kept.orig"
expect_fail 1 "is larger than the file-size limit (ulimit -f: 10485760 bytes)" \
  bash -c 'ulimit -f 10240 && exec "$@"' - "$SLUICE" copy "$scratch/over-limit" "$scratch/kept"
one_clear_line
cmp -s "$scratch/kept" "$scratch/kept.orig" || fail "the destination was changed by a copy that could not fit"
# The receiving side: an output that cannot grow to --size is found when serve starts
# (SIGXFSZ used to kill serve without a message; then the first sender found it). The
# file-size limit stands in for a filesystem's largest file (ext4's 16 TiB), which
# scratch space on tmpfs does not have.
rm -f "$scratch/limit.sock"
expect_fail 1 "limit.out: the image (20971520 bytes) is larger than the file-size limit (ulimit -f: 10485760 bytes)" \
  bash -c 'ulimit -f 10240 && exec timeout 20 "$@"' - "$SLUICE" serve --listen "unix://$scratch/limit.sock" \
  --protocol raw --output "$scratch/limit.out" --size 20M --once
one_clear_line
[[ ! -e $scratch/limit.sock ]] || fail "a serve whose output cannot hold --size listened"
rm -f "$scratch/over-limit" "$scratch/kept" "$scratch/kept.orig" "$scratch/limit.out"

log "transfer buffers that cannot be allocated: an error, not a short copy"
# 64 requests of 32 MiB cannot fit under a 120 MB address-space limit. Sanitizer
# builds reserve terabytes of shadow memory and cannot run under any such limit: skip
# the case when a small copy cannot run under it either.
random_file "$scratch/big" 200M
if (ulimit -v 120000 && "$SLUICE" copy "$scratch/src" null:) 2>/dev/null; then
  rm -f "$scratch/dst"
  expect_fail 1 "cannot allocate a transfer buffer" bash -c 'ulimit -v 120000 && exec "$@"' - \
    timeout 60 "$SLUICE" copy --no-zero-copy --depth 64 --request-size 32M --sparse=0 "$scratch/big" "$scratch/dst"
  one_clear_line
  head -c 640M /dev/zero >"$scratch/zeros"
  expect_fail 1 "cannot allocate a transfer buffer" bash -c 'ulimit -v 120000 && exec "$@"' - \
    timeout 60 "$SLUICE" copy --no-zero-copy --depth 8 --request-size 32M --sparse=0 "$scratch/zeros" null:
  one_clear_line
  rm -f "$scratch/zeros" "$scratch/dst"
else
  log "skipped: this build cannot run under an address-space limit (a sanitizer build?)"
fi

# --- root only: a filesystem without O_DIRECT, a full filesystem ----------------------

log "--direct onto a filesystem without O_DIRECT fails before touching the destination"
requires mount umount
[[ $(id -u) -eq 0 ]] || skip "mounting ramfs and a small tmpfs needs root (every other case above passed)"
mkdir "$scratch/ramfs"
mount -t ramfs sluice-test-ramfs "$scratch/ramfs" ||
  skip "cannot mount a ramfs here (in a container without CAP_SYS_ADMIN?)"
on_exit "umount -l '$scratch/ramfs'"
random_file "$scratch/ramfs/dst" 1M
cp "$scratch/ramfs/dst" "$scratch/dst.before"
expect_fail 1 "cannot open with O_DIRECT" "$SLUICE" copy --direct "$scratch/src" "$scratch/ramfs/dst"
one_clear_line
same_content "$scratch/dst.before" "$scratch/ramfs/dst"

log "a destination on a full filesystem"
mkdir "$scratch/full"
mount -t tmpfs -o size=8M sluice-test-full "$scratch/full" ||
  skip "cannot mount a tmpfs here (in a container without CAP_SYS_ADMIN?)"
on_exit "umount -l '$scratch/full'"
expect_fail 1 "No space left on device" "$SLUICE" copy "$scratch/big" "$scratch/full/dst"
one_clear_line
[[ $err =~ at\ offset\ [0-9]+ ]] || fail "the error does not name an offset: $err"
# The same through the O_DIRECT path (tmpfs may refuse O_DIRECT; then that is the error).
expect_status 1 "$SLUICE" copy --direct "$scratch/big" "$scratch/full/dst"
one_clear_line

log "ok"
