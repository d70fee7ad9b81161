#!/bin/bash
# apps/examples/embed_copy, blocking_copy and receive_image: the public C++ API used
# the way a toolstack embeds it, as a coroutine on its own loop and in the blocking
# form, on the sending side and on the receiving side.
. "$(dirname "$0")/functions.sh"

EMBED_COPY=${EMBED_COPY:-$BUILD_ROOT/apps/examples/embed_copy}
BLOCKING_COPY=${BLOCKING_COPY:-$BUILD_ROOT/apps/examples/blocking_copy}
[[ -x $EMBED_COPY ]] || fail "no embed_copy binary at '$EMBED_COPY'"
[[ -x $BLOCKING_COPY ]] || fail "no blocking_copy binary at '$BLOCKING_COPY'"
RECEIVE_IMAGE=${RECEIVE_IMAGE:-$BUILD_ROOT/apps/examples/receive_image}
[[ -x $RECEIVE_IMAGE ]] || fail "no receive_image binary at '$RECEIVE_IMAGE'"

M=$((1024 * 1024))
sparse_file "$scratch/src.img" $((48 * M + 1234))
write_random "$scratch/src.img" 0 3M
write_random "$scratch/src.img" 17M 5M
write_zeros "$scratch/src.img" 18M 1M
write_random "$scratch/src.img" 48M 1234

log "a sparse copy through the API"
expect_ok "$EMBED_COPY" "$scratch/src.img" "$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"
assert_le "allocated bytes of the copy" "$(allocated_bytes "$scratch/dst.img")" "$(allocated_bytes "$scratch/src.img")"
[[ $err == *"copied $((48 * M + 1234)) bytes"* ]] || fail "embed_copy did not report the copy: $err"

log "through file:// URIs, onto the existing copy"
expect_ok "$EMBED_COPY" "file://$scratch/src.img" "file://$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"

log "cancelled by its deadline"
random_file "$scratch/big.img" 256M
expect_fail 1 "copy failed: the transfer was cancelled" "$EMBED_COPY" "$scratch/big.img" null: 0

log "the blocking form: a copy, then a cancellation from another thread"
expect_ok "$BLOCKING_COPY" "$scratch/src.img" "$scratch/dst2.img"
same_content "$scratch/src.img" "$scratch/dst2.img"
[[ $err == *"copied $((48 * M + 1234)) bytes"* ]] || fail "blocking_copy did not report the copy: $err"
expect_fail 1 "copy failed: the transfer was cancelled" "$BLOCKING_COPY" "$scratch/big.img" null: 0

# A peer that accepts and then says nothing: cancelling must stop the transfer where
# it waits (connecting, in a handshake), not only once data moves. It used to wait
# for ever, there being no --timeout by default.
log "cancelled while the endpoints open"
stall_port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PYTHON" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
held = []
while True:
    held.append(s.accept()[0])
    with open(sys.argv[2], "a") as log:  # one line per connection, for the SIGINT case
        log.write("accepted\n")
' "$stall_port" "$scratch/stall.accepts" &
stall_pid=$!
on_exit "kill $stall_pid"
for _ in $(seq 50); do
  "$PYTHON" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$stall_port" \
    2>/dev/null && break
  sleep 0.1
done
for dest in "nbd://127.0.0.1:$stall_port/" "tls://127.0.0.1:$stall_port" "http://127.0.0.1:$stall_port/import"; do
  started=$SECONDS
  expect_fail 1 "copy failed: the transfer was cancelled" timeout 30 "$EMBED_COPY" "$scratch/src.img" "$dest" 1
  assert_le "seconds to stop a cancelled open of $dest" $((SECONDS - started)) 10
done
started=$SECONDS
expect_fail 1 "copy failed: the transfer was cancelled" timeout 30 "$BLOCKING_COPY" "nbd://127.0.0.1:$stall_port/" null: 1
assert_le "seconds to stop a cancelled blocking open" $((SECONDS - started)) 10
started=$SECONDS
accepted_before=$(cat "$scratch/stall.accepts" 2>/dev/null | wc -l)
# --foreground: without it timeout passes the SIGINT on twice, to sluice and to its
# process group, and the second can land after sluice has put the default action back
# on its way out, ending it by the signal (status 130).
timeout --foreground 30 "$SLUICE" copy "nbd://127.0.0.1:$stall_port/" null: 2>"$scratch/int.err" &
copy_pid=$!
# Once it has connected its handler for SIGINT is in place (a fixed sleep raced the
# sanitizer build's start); the copy then waits for a greeting that never comes.
for _ in $(seq 200); do
  (($(cat "$scratch/stall.accepts" 2>/dev/null | wc -l) > accepted_before)) && break
  sleep 0.05
done
kill -INT $copy_pid
status=0
wait $copy_pid || status=$?
[[ $status -eq 1 ]] && grep -q "the transfer was cancelled" "$scratch/int.err" ||
  fail "sluice copy on SIGINT while opening: exit $status, $(cat "$scratch/int.err")"
assert_le "seconds for sluice copy to stop on SIGINT while opening" $((SECONDS - started)) 10

expect_fail 1 "copy failed: $scratch/missing.img: No such file or directory" \
  "$EMBED_COPY" "$scratch/missing.img" "$scratch/out.img"
expect_fail 2 "usage" "$EMBED_COPY" "$scratch/src.img"

# The receiving side: listening on port 0, it prints the URI a sender needs.
# receive_image ARGS...: starts it; sets recv_pid and recv_uri.
start_receive_image() {
  rm -f "$scratch/recv.uri"
  "$RECEIVE_IMAGE" "$@" >"$scratch/recv.uri" 2>"$scratch/recv.err" &
  recv_pid=$!
  on_exit "kill $recv_pid 2>/dev/null"
  recv_uri=
  for _ in $(seq 200); do
    # The file appears only once the child has opened it; until then head fails, and
    # under set -e that would end the test silently.
    recv_uri=$(head -n1 "$scratch/recv.uri" 2>/dev/null || true)
    [[ -n $recv_uri ]] && break
    kill -0 $recv_pid 2>/dev/null || break
    sleep 0.05
  done
  [[ -n $recv_uri ]] || fail "receive_image printed no address: $(cat "$scratch/recv.err")"
}

log "receive_image: a Chunked image over TCP on a port it picked"
start_receive_image tcp://127.0.0.1:0 "$scratch/received.img" $((48 * M + 1234))
[[ $recv_uri =~ ^tcp://127\.0\.0\.1:[0-9]+$ && $recv_uri != *:0 ]] || fail "receive_image listens at '$recv_uri'"
expect_ok "$SLUICE" copy "$scratch/src.img" "$recv_uri"
wait $recv_pid || fail "receive_image failed: $(cat "$scratch/recv.err")"
same_content "$scratch/src.img" "$scratch/received.img"
grep -q "received $((48 * M + 1234)) bytes from tcp 127.0.0.1:[0-9]* into $scratch/received.img" "$scratch/recv.err" ||
  fail "receive_image did not report the image: $(cat "$scratch/recv.err")"

log "receive_image: over a Unix socket, into the image it received before"
write_random "$scratch/src.img" 30M 2M
start_receive_image "unix://$scratch/recv.sock" "$scratch/received.img"
[[ $recv_uri == "unix://$scratch/recv.sock" ]] || fail "receive_image listens at '$recv_uri'"
expect_ok "$SLUICE" copy "$scratch/src.img" "$recv_uri"
wait $recv_pid || fail "receive_image failed: $(cat "$scratch/recv.err")"
same_content "$scratch/src.img" "$scratch/received.img"
[[ ! -e $scratch/recv.sock ]] || fail "receive_image left its socket file behind"

log "receive_image: a sender that stops half way is an error, not a received image"
start_receive_image tcp://127.0.0.1:0 "$scratch/half.img" 8M
"$PYTHON" -c '
import socket, struct, sys
host, port = sys.argv[1].rsplit("/", 1)[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
s.sendall(struct.pack("<QI", 0, 4096) + b"x" * 4096)
s.close()' "$recv_uri"
status=0
wait $recv_pid || status=$?
[[ $status -eq 1 ]] && grep -q "receive failed: .*without the terminator" "$scratch/recv.err" ||
  fail "receive_image on a truncated stream: exit $status, $(cat "$scratch/recv.err")"
expect_fail 1 "receive failed: --output null: keeps nothing and so has no size" "$RECEIVE_IMAGE" tcp://127.0.0.1:0 null:

log "ok"
