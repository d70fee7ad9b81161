#!/bin/bash
# sluice copy -> sluice serve over every transport (tcp, unix, tls; bare, HTTP, HTTPS)
# with both protocols (chunked, raw), on a sparse image with an unaligned size and on
# a dense one, with and without --prezeroed. Each received image must equal the
# source byte for byte. Without --prezeroed the output starts out as 0xFF garbage
# (the receiver never truncates), so every hole must have been sent as zeros.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"

make_certs certs
make_image sparse.img $((9 * 1024 * 1024 + 777)) sparse
make_image dense.img $((5 * 1024 * 1024))
# Given only where TLS is spoken: on a plaintext transport they are a usage error.
TLS_SERVER_OPTIONS=(--tls-cert certs/server-cert.pem --tls-key certs/server-key.pem)
TLS_CLIENT_OPTIONS=(--tls-ca certs/ca-cert.pem)

garbage() {  # garbage PATH SIZE
  $PY -c 'import sys; open(sys.argv[1],"wb").write(b"\xff" * int(sys.argv[2]))' "$1" "$2"
}

run_case() {  # run_case TRANSPORT PROTOCOL IMAGE PREZEROED
  local transport=$1 protocol=$2 image=$3 prezeroed=$4 port listen dest http=() serve_size=() copy_extra=()
  local size name
  size=$(stat -c %s "$image")
  port=$(free_port)
  case $transport in
    tcp) listen=tcp://127.0.0.1:$port dest=tcp://127.0.0.1:$port ;;
    unix) listen=unix://$WORK/s.sock dest=unix://$WORK/s.sock ;;
    tls) listen=tls://127.0.0.1:$port dest=tls://localhost:$port ;;
    http) listen=tcp://127.0.0.1:$port dest="http://127.0.0.1:$port/import_raw_vdi?vdi=OpaqueRef:1&session_id=s" http=(--http) ;;
    https) listen=tls://127.0.0.1:$port dest="https://localhost:$port/import_raw_vdi?vdi=x" http=(--http) ;;
  esac
  TLS_SERVER=() TLS_CLIENT=()
  if [ "$transport" = tls ] || [ "$transport" = https ]; then
    TLS_SERVER=("${TLS_SERVER_OPTIONS[@]}") TLS_CLIENT=("${TLS_CLIENT_OPTIONS[@]}")
  fi
  rm -f out.img "$WORK/s.sock"
  if [ "$prezeroed" = yes ]; then
    serve_size=(--size "$size")  # a fresh output: it reads as zeros
    copy_extra=(--prezeroed)
  else
    garbage out.img "$size"
  fi
  name="$transport/$protocol/$image/prezeroed=$prezeroed"
  start_serve serve.log --listen "$listen" --protocol "$protocol" "${http[@]}" --output out.img "${serve_size[@]}" \
    --once "${TLS_SERVER[@]}" || { fail "$name: server did not start"; cat serve.log; return; }
  if ! "$SLUICE" copy --protocol "$protocol" "${copy_extra[@]}" "${TLS_CLIENT[@]}" --stats "$image" "$dest" \
      >stats.json 2>copy.log; then
    fail "$name: copy failed: $(cat copy.log)"
  fi
  wait "$SERVE_PID" || fail "$name: serve exited $?: $(cat serve.log)"
  if same_image "$image" out.img; then pass "$name"; else fail "$name: the received image differs"; fi
  [ "$(stat -c %s out.img)" = "$size" ] || fail "$name: output size $(stat -c %s out.img), expected $size"
  grep -q "received .* (flushed)" serve.log || fail "$name: serve did not report a flushed success"
  [ -n "$(json_field stats.json socket_writes)" ] || fail "$name: --stats lacks socket_writes"
  case $transport in
    tls | https) [ -n "$(json_field stats.json tls_records)" ] || fail "$name: --stats lacks tls_records" ;;
    unix) ;;
    *) [ -n "$(json_field stats.json tcp_segments)" ] || fail "$name: --stats lacks tcp_segments" ;;
  esac
}

for transport in tcp unix tls http https; do
  for image in sparse.img dense.img; do
    run_case $transport chunked $image no
    run_case $transport chunked $image yes
    run_case $transport raw $image no
  done
done
# raw cannot skip on a stream: --prezeroed holes still go out as zeros.
run_case tcp raw sparse.img yes

# The receiver's xapi-style progress: three-digit percentages on stdout, rising,
# ending with 100 once the data was flushed.
port=$(free_port)
rm -f out.img
start_serve progress.log --listen tcp://127.0.0.1:$port --output out.img --size "$(stat -c %s dense.img)" \
  --once --progress=xapi || exit 1
"$SLUICE" copy dense.img tcp://127.0.0.1:$port 2>copy.log || fail "progress: copy failed: $(cat copy.log)"
wait "$SERVE_PID" || fail "progress: serve failed: $(cat progress.log)"
if $PY - progress.log.out <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
assert re.fullmatch(r"(\d{3})+", text), text
values = [int(text[i:i + 3]) for i in range(0, len(text), 3)]
assert values == sorted(set(values)) and values[-1] == 100 and len(values) >= 2, values
PYEOF
then pass "receiver progress, xapi style: $(cat progress.log.out)"; else fail "receiver progress: '$(cat progress.log.out)'"; fi
finish
