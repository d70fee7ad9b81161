#!/bin/bash
# Zero-copy on plain sockets: the sender splices file data into the socket and the
# receiver splices payloads from the socket into its output. Every pairing of a
# splicing and a copying end (--no-zero-copy on either side), over TCP and Unix
# sockets, with both protocols, must deliver the same bytes; --stats must say which
# path the sender took (zero_copy_writes), and TLS must never take it. A receiver
# that already holds body bytes behind the HTTP headers must write those before it
# splices the rest.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"

CRAFT="$SOURCE_ROOT/tests/integration/stream_craft.py"
make_certs certs
# An unaligned size: the chunked sender reads the padded last sector into memory.
make_image dense.img $((6 * 1024 * 1024 + 1234))
make_image sparse.img $((12 * 1024 * 1024 + 512)) sparse
SIZE=$(stat -c %s dense.img)

run_pair() {  # run_pair TRANSPORT PROTOCOL IMAGE SEND_ZC RECV_ZC
  local transport=$1 protocol=$2 image=$3 send=$4 recv=$5 name writes
  local send_opts=() recv_opts=()
  [ "$send" = on ] || send_opts=(--no-zero-copy)
  [ "$recv" = on ] || recv_opts=(--no-zero-copy)
  stream_endpoints "$transport"
  name="$transport/$protocol/$image send-zero-copy=$send receive-zero-copy=$recv"
  rm -f out.img
  start_serve serve.log --listen "$LISTEN" --protocol "$protocol" --output out.img \
    --size "$(stat -c %s "$image")" --once "${recv_opts[@]}" "${TLS_SERVE[@]}" ||
    { fail "$name: server did not start: $(cat serve.log)"; return; }
  "$SLUICE" copy --protocol "$protocol" "${send_opts[@]}" "${TLS_COPY[@]}" --stats "$image" "$DEST" \
    >stats.json 2>copy.log || fail "$name: copy failed: $(cat copy.log)"
  wait "$SERVE_PID" || fail "$name: serve failed: $(cat serve.log)"
  if same_image "$image" out.img; then pass "$name: same bytes"; else fail "$name: the received image differs"; fi
  writes=$(json_field stats.json zero_copy_writes)
  if [ "$send" = on ] && [ "$transport" != tls ]; then
    [ "${writes:-0}" -gt 0 ] && pass "$name: $writes spliced writes" || fail "$name: no spliced writes ($writes)"
  else
    [ "$writes" = 0 ] && pass "$name: nothing spliced" || fail "$name: $writes spliced writes, expected none"
  fi
}

for transport in tcp unix; do
  for protocol in chunked raw; do
    for send in on off; do
      for recv in on off; do run_pair $transport $protocol dense.img $send $recv; done
    done
  done
  run_pair $transport chunked sparse.img on on
  run_pair $transport raw sparse.img on on
done
run_pair tls chunked dense.img on on
run_pair tls raw dense.img on on

# Body bytes buffered behind the HTTP request: written from memory, the rest spliced.
port=$(free_port)
rm -f out.img
start_serve eager.log --listen tcp://127.0.0.1:$port --http --output out.img --size $((4 * 1024 * 1024)) --once ||
  exit 1
status=$($PY "$CRAFT" 127.0.0.1:$port eager-http 2>&1)
wait "$SERVE_PID" || fail "eager HTTP body: serve failed: $(cat eager.log)"
case $status in *" 200 "*) pass "eager HTTP body: $status" ;; *) fail "eager HTTP body: status $status" ;; esac
if $PY - out.img <<'PYEOF'
import sys
data = open(sys.argv[1], "rb").read()
assert len(data) == 4 << 20, len(data)
assert data[:4096] == b"\xab" * 4096
assert data[4096:1 << 20] == bytes((1 << 20) - 4096)
assert data[1 << 20:2 << 20] == b"\x5a" * (1 << 20)
assert data[2 << 20:] == bytes(2 << 20)
PYEOF
then pass "eager HTTP body: every byte where it belongs"; else fail "eager HTTP body: wrong output"; fi

finish
