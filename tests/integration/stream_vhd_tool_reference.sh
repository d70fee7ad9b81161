#!/bin/bash
# Sluice against an independent reference of vhd-tool's wire behaviour
# (vhd_tool_reference.py, written from shared/docs/xapi-vhd-tool.md), both ways:
#  - sluice copy -> reference receiver: images equal (the reference writes the padded
#    last sector, as vhd-tool does); the reference checks the HTTP request byte for
#    byte (--strict) and that the chunks cover the padded image exactly once;
#  - reference sender -> sluice serve: images equal; Sluice's HTTP answer is xapi's;
#  - the reference answering `Transfer-encoding: nbd` or a 302 gets a clear error.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"
make_certs certs
make_image sparse.img $((9 * 1024 * 1024 + 777)) sparse
SIZE=$(stat -c %s sparse.img)
PADDED=$(((SIZE + 511) / 512 * 512))

reference_serve() {  # reference_serve ARGS...: REF_PID, REF_PORT
  rm -f port
  $PY "$REFERENCE" serve --port-file port "$@" 2>ref.log &
  REF_PID=$!
  SERVER_PIDS+=("$REF_PID")
  local i
  for i in $(seq 1 100); do [ -s port ] && break; sleep 0.05; done
  REF_PORT=$(cat port)
}

to_reference() {  # to_reference NAME DEST-TEMPLATE SERVE-ARGS -- COPY-ARGS
  local name=$1 template=$2 serve_args=() copy_args=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do serve_args+=("$1"); shift; done
  shift
  copy_args=("$@")
  rm -f out.img
  reference_serve --destination out.img "${serve_args[@]}"
  local dest=${template//PORT/$REF_PORT}
  if ! "$SLUICE" copy "${copy_args[@]}" sparse.img "$dest" 2>copy.log; then
    fail "sluice -> reference $name: copy failed: $(cat copy.log)"
  fi
  if ! wait "$REF_PID"; then
    fail "sluice -> reference $name: the reference failed: $(cat ref.log)"
  elif same_image sparse.img out.img; then
    pass "sluice -> reference $name"
  else
    fail "sluice -> reference $name: image differs"
  fi
}

to_reference "tcp chunked" tcp://127.0.0.1:PORT --strict --expect-coverage $PADDED --
to_reference "tcp chunked --prezeroed" tcp://127.0.0.1:PORT --strict -- --prezeroed
to_reference "tcp none" tcp://127.0.0.1:PORT --source-protocol none --destination-size $SIZE -- --protocol raw
to_reference "unix chunked" unix://$WORK/ref.sock --unix $WORK/ref.sock --strict --expect-coverage $PADDED --
to_reference "http chunked" "http://127.0.0.1:PORT/import_raw_vdi?vdi=OpaqueRef:abc&session_id=OpaqueRef:s" \
  --http --strict --expect-target "/import_raw_vdi?vdi=OpaqueRef:abc&session_id=OpaqueRef:s" \
  --expect-coverage $PADDED --record-request request.txt --
to_reference "http none" "http://127.0.0.1:PORT/import_raw_vdi?vdi=x" --http --strict --source-protocol none \
  --destination-size $SIZE -- --protocol raw
to_reference "http chunked, a 100 Continue and bare-LF lines before the 200" "http://127.0.0.1:PORT/import_raw_vdi?vdi=x" \
  --http --strict --answer-lenient --expect-coverage $PADDED --
to_reference "https chunked (TLS 1.2 as xapi's stunnel)" "https://localhost:PORT/import_raw_vdi?vdi=x" \
  --http --strict --tls12 --tls-cert certs/server-cert.pem --tls-key certs/server-key.pem \
  --expect-coverage $PADDED -- --tls-ca certs/ca-cert.pem

# The request line and headers, byte for byte (vhd-tool's, with our user agent).
printf 'PUT /import_raw_vdi?vdi=OpaqueRef:abc&session_id=OpaqueRef:s HTTP/1.1\r\nhost: 127.0.0.1:%s\r\nuser-agent: sluice\r\ncookie: chunked=true\r\n\r\n' \
  "$(sed -n 's/^host: 127.0.0.1:\([0-9]*\)\r$/\1/p' request.txt)" >expected-request.txt
cmp -s request.txt expected-request.txt && pass "the import request, byte for byte" ||
  fail "the import request differs: $(cat -A request.txt)"

from_reference() {  # from_reference NAME LISTEN DEST SERVE-ARGS -- STREAM-ARGS
  local name=$1 listen=$2 dest=$3 serve_args=() stream_args=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do serve_args+=("$1"); shift; done
  shift
  stream_args=("$@")
  rm -f out.img
  start_serve serve.log --listen "$listen" --output out.img --size "$SIZE" --once "${serve_args[@]}" || return
  if ! $PY "$REFERENCE" stream --source sparse.img --destination "$dest" "${stream_args[@]}" 2>ref.log; then
    fail "reference -> sluice $name: the reference failed: $(cat ref.log)"
  fi
  if ! wait "$SERVE_PID"; then
    fail "reference -> sluice $name: serve failed: $(cat serve.log)"
  elif cmp -s sparse.img out.img; then
    pass "reference -> sluice $name"
  else
    fail "reference -> sluice $name: image differs"
  fi
}
port=$(free_port)
from_reference "tcp chunked" tcp://127.0.0.1:$port tcp://127.0.0.1:$port --
port=$(free_port)
from_reference "tcp chunked --prezeroed" tcp://127.0.0.1:$port tcp://127.0.0.1:$port -- --prezeroed
port=$(free_port)
from_reference "tcp none" tcp://127.0.0.1:$port tcp://127.0.0.1:$port --protocol raw -- --destination-protocol none
from_reference "unix chunked" unix://$WORK/s.sock unix://$WORK/s.sock --
port=$(free_port)
from_reference "http chunked" tcp://127.0.0.1:$port "http://127.0.0.1:$port/import_raw_vdi?vdi=x" --http -- \
  --record-response response.txt
printf 'HTTP/1.1 200 OK\r\nConnection: close\r\nCache-Control: no-cache, no-store\r\ncontent-type: application/octet-stream\r\n\r\n' \
  >expected-response.txt
cmp -s response.txt expected-response.txt && pass "the import answer, byte for byte (xapi's, without task-id)" ||
  fail "the import answer differs: $(cat -A response.txt)"
port=$(free_port)
from_reference "https chunked (TLS 1.2 client)" tls://127.0.0.1:$port "https://localhost:$port/import_raw_vdi?vdi=x" \
  --http --tls-cert certs/server-cert.pem --tls-key certs/server-key.pem -- --cafile certs/ca-cert.pem

# "Transfer-encoding: nbd" (xapi's /services/SM/nbdproxy): the same connection then
# speaks NBD, here relayed to nbdkit; the export must end up equal to the source.
if command -v nbdkit >/dev/null && command -v nbdcopy >/dev/null; then
  size=$(stat -c %s sparse.img)
  rm -f nbd.sock
  nbdkit --exit-with-parent -f -U "$WORK/nbd.sock" memory size="$size" 2>nbdkit.log &
  SERVER_PIDS+=("$!")
  for i in $(seq 1 100); do [ -S nbd.sock ] && break; sleep 0.05; done
  reference_serve --destination out.img --http --answer-nbd --nbd-upstream "$WORK/nbd.sock"
  if ! "$SLUICE" copy sparse.img "http://127.0.0.1:$REF_PORT/services/SM/nbdproxy/vm/sr/vdi/dp" 2>copy.log; then
    fail "Transfer-encoding: nbd: the copy failed: $(cat copy.log)"
  else
    nbdcopy "nbd+unix:///?socket=$WORK/nbd.sock" nbd-back.img
    cmp -s sparse.img nbd-back.img && pass "Transfer-encoding: nbd switches the connection to NBD; the export equals the source" ||
      fail "Transfer-encoding: nbd: the export differs from the source"
  fi
  wait "$REF_PID"
else
  fail "nbdkit and nbdcopy are needed (tests/setup-debian.sh installs them)"
fi
reference_serve --destination out.img --http --answer-status "302 Found"
if "$SLUICE" copy sparse.img "http://127.0.0.1:$REF_PORT/import_raw_vdi" 2>copy.log; then
  fail "302: the copy succeeded"
elif grep -q "HTTP/1.1 302 Found" copy.log; then
  pass "a 302 is not followed and named: $(cat copy.log)"
else
  fail "302: $(cat copy.log)"
fi
wait "$REF_PID"
finish
