#!/bin/bash
# `sluice serve --output null:`: the link test. The receiver parses and checks every
# header as usual and drops the payload (spliced into /dev/null from a plain socket,
# from memory otherwise). Nothing is kept, so what is checked is what the receiver
# says it took: exactly the bytes the sender sent, for both protocols, spliced or not,
# TCP, Unix and TLS, dense and sparse; a bad stream still fails; a server without
# --once goes on after it; --size is required and --direct refused.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"
CRAFT="$SOURCE_ROOT/tests/integration/stream_craft.py"

make_certs certs
make_image dense.img $((6 * 1024 * 1024 + 1024))
make_image sparse.img $((12 * 1024 * 1024 + 512)) sparse

# received_bytes LOG: the count in serve's "received N bytes ... (discarded)" line
# (which names the cipher after "over TLS" on a TLS connection).
received_bytes() {
  sed -n 's/.*received \([0-9]*\) bytes in [0-9]* writes\( over TLS [A-Z0-9_]*\)\{0,1\} into null: (discarded)$/\1/p' "$1"
}

run_case() {  # run_case TRANSPORT PROTOCOL IMAGE RECEIVE_ZERO_COPY [COPY OPTIONS...]
  local transport=$1 protocol=$2 image=$3 zc=$4 name got expected
  shift 4
  local recv_opts=()
  [ "$zc" = on ] || recv_opts=(--no-zero-copy)
  stream_endpoints "$transport"
  name="$transport/$protocol/$image receive-zero-copy=$zc${*:+ $*}"
  start_serve serve.log --listen "$LISTEN" --protocol "$protocol" --output null: --size "$(stat -c %s "$image")" \
    --once "${recv_opts[@]}" "${TLS_SERVE[@]}" || { fail "$name: server did not start: $(cat serve.log)"; return; }
  "$SLUICE" copy --protocol "$protocol" "${TLS_COPY[@]}" "$@" --stats "$image" "$DEST" >stats.json 2>copy.log ||
    fail "$name: copy failed: $(cat copy.log)"
  wait "$SERVE_PID" || { fail "$name: serve failed: $(cat serve.log)"; return; }
  got=$(received_bytes serve.log)
  # Zero ranges go out as zeros (the sender counts them apart, as zeroed), except with
  # --prezeroed, where the chunked sender leaves them out and the receiver gets less.
  expected=$(($(json_field stats.json bytes_written) + $(json_field stats.json bytes_zeroed)))
  if [ -n "$got" ] && [ "$got" = "$expected" ]; then
    pass "$name: the receiver took and dropped the $got bytes sent"
  else
    fail "$name: the receiver says '${got:-nothing}', the sender wrote $expected: $(cat serve.log)"
  fi
  if [ "$transport" = tls ]; then
    # Both ends name the suite they settled on: Sluice's default, AES-128-GCM first.
    got=$(json_field stats.json tls_cipher)
    [ "$got" = TLS_AES_128_GCM_SHA256 ] || fail "$name: the sender's tls_cipher is '$got'"
    grep -q ' over TLS TLS_AES_128_GCM_SHA256 into null:' serve.log ||
      fail "$name: the receiver's line does not name the cipher: $(cat serve.log)"
  fi
}

for transport in tcp unix; do
  for protocol in chunked raw; do
    for zc in on off; do run_case $transport $protocol dense.img $zc; done
    run_case $transport $protocol sparse.img on
  done
  run_case $transport chunked sparse.img on --prezeroed
done
run_case tls chunked dense.img on
run_case tls raw sparse.img on

# Bad streams still fail, and a server without --once serves the next one.
port=$(free_port)
start_serve bad.log --listen tcp://127.0.0.1:$port --protocol chunked --output null: --size $((4 * 1024 * 1024)) ||
  exit 1
$PY "$CRAFT" 127.0.0.1:$port out-of-bounds >/dev/null 2>&1
$PY "$CRAFT" 127.0.0.1:$port truncated >/dev/null 2>&1
# A one-way sender learns of a refusal only if it is still sending when the receiver
# gives up; when its last bytes were already in the socket buffers it cannot know. So
# the receiver's word is what is checked: it must refuse the chunk past --size.
"$SLUICE" copy --protocol chunked dense.img tcp://127.0.0.1:$port >/dev/null 2>copy.log
head -c $((2 * 1024 * 1024)) dense.img >small.img
"$SLUICE" copy --protocol chunked small.img tcp://127.0.0.1:$port 2>copy.log ||
  fail "a good stream after the bad ones failed: $(cat copy.log)"
for _ in $(seq 1 100); do
  grep -q 'received 2097152 bytes' bad.log && [ "$(grep -c 'beyond the image size' bad.log)" -ge 2 ] && break
  sleep 0.05
done
[ "$(grep -c 'beyond the image size 4194304' bad.log)" -eq 2 ] &&
  pass "out of bounds, crafted and a 6 MiB image into a 4 MiB null:: $(grep -m1 'beyond' bad.log)" ||
  fail "out of bounds: expected two refusals in $(cat bad.log)"
grep -q 'received 6292480 bytes' bad.log && fail "the 6 MiB image was taken into a 4 MiB null:"
grep -q 'without the terminator' bad.log && pass "truncated: reported" || fail "truncated: no error in $(cat bad.log)"
grep -q 'received 2097152 bytes in [0-9]* writes into null: (discarded)' bad.log &&
  pass "the next good stream was received" || fail "the good stream after the bad ones: $(cat bad.log)"
kill "$SERVE_PID" 2>/dev/null

# Usage: no size to take from null:, and O_DIRECT makes no sense for it.
"$SLUICE" serve --listen tcp://127.0.0.1:$(free_port) --output null: 2>err.log
rc=$?
[ $rc -ne 0 ] && grep -q 'give --size' err.log && pass "null: without --size: $(cat err.log)" ||
  fail "null: without --size: exit $rc, $(cat err.log)"
"$SLUICE" serve --listen tcp://127.0.0.1:$(free_port) --output null: --size 1M --direct 2>err.log
rc=$?
[ $rc -eq 2 ] && pass "null: with --direct is a usage error" || fail "null: with --direct: exit $rc, $(cat err.log)"

# A repeated --listen or --output is refused, not silently replaced by the last one.
"$SLUICE" serve --listen tcp://127.0.0.1:$(free_port) --listen tcp://127.0.0.1:$(free_port) --output null: \
  --size 1M --once 2>err.log
rc=$?
[ $rc -eq 2 ] && grep -q -- '--listen given twice' err.log && pass "a second --listen is a usage error" ||
  fail "a second --listen: exit $rc, $(cat err.log)"
"$SLUICE" serve --listen tcp://127.0.0.1:$(free_port) --output null: --output other.img --size 1M --once 2>err.log
rc=$?
[ $rc -eq 2 ] && grep -q -- '--output given twice' err.log && [ ! -e other.img ] &&
  pass "a second --output is a usage error" || fail "a second --output: exit $rc, $(cat err.log)"

# A file output that no transfer could use fails at start, --size or not (it was found
# only by each sender in turn); a socket path held by a regular file is left alone.
mkdir a-dir
timeout 10 "$SLUICE" serve --listen tcp://127.0.0.1:$(free_port) --output a-dir --size 1M 2>err.log
rc=$?
[ $rc -eq 1 ] && grep -q 'a-dir: Is a directory' err.log && pass "a directory as --output fails at start: $(cat err.log)" ||
  fail "a directory as --output with --size: exit $rc, $(cat err.log)"
echo keep >not-a-socket
timeout 10 "$SLUICE" serve --listen "unix://$WORK/not-a-socket" --output null: --size 1M 2>err.log
rc=$?
[ $rc -eq 1 ] && grep -q 'the path exists and is not a socket' err.log && [ "$(cat not-a-socket)" = keep ] &&
  pass "a regular file at the socket path: refused and kept" || fail "a regular file at the socket path: exit $rc, $(cat err.log)"

# A socket path a live server listens on is not taken over (its clients would reach
# the newcomer instead: it was unlinked and rebound); the live server goes on
# serving, removes its socket file when it stops, and a stale one left by a server
# that is gone is replaced.
start_serve live.log --listen "unix://$WORK/live.sock" --output null: --size 1M || exit 1
live=$SERVE_PID
timeout 10 "$SLUICE" serve --listen "unix://$WORK/live.sock" --output null: --size 1M 2>err.log
rc=$?
[ $rc -eq 1 ] && grep -q 'another server is listening on it' err.log &&
  pass "a live server's socket path is refused: $(cat err.log)" || fail "a live server's socket path: exit $rc, $(cat err.log)"
make_image small.img 65536
"$SLUICE" copy small.img "unix://$WORK/live.sock" 2>copy.log && pass "the live server still serves its path" ||
  fail "the live server lost its path: $(cat copy.log)"
kill "$live"
wait "$live" && [ ! -e live.sock ] && pass "a stopped server removes its socket file" ||
  fail "after SIGTERM: exit status, or live.sock is still there: $(ls -l live.sock 2>&1)"
$PY -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$WORK/stale.sock"
stale_inode=$(stat -c %i stale.sock)
start_serve stale.log --listen "unix://$WORK/stale.sock" --output null: --size 1M || exit 1
for _ in $(seq 1 100); do [ "$(stat -c %i stale.sock 2>/dev/null)" != "$stale_inode" ] && break; sleep 0.05; done
"$SLUICE" copy small.img "unix://$WORK/stale.sock" 2>copy.log && pass "a stale socket file is replaced" ||
  fail "a stale socket file: $(cat copy.log) / $(cat stale.log)"
kill "$SERVE_PID"

finish
