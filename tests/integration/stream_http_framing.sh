#!/bin/bash
# The HTTP import decides its body's framing per request, as xen-api does: a `chunked`
# cookie or query parameter means Chunked, its absence a raw body of Content-Length
# bytes (or of the image's size). `serve --protocol`, given, constrains it: a request
# asking for the other framing gets a 4xx before a byte is written. Paths other than the
# import paths, Transfer-Encoding and a Content-Length other than the image's size are
# refused too. Every accepted transfer is checked byte for byte; every refused one
# leaves the output as it was and makes `serve --once` exit 1.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"
CRAFT="$SOURCE_ROOT/tests/integration/stream_craft.py"
SIZE=$((8 * 1024 * 1024))

# A raw image whose first 12 bytes are zero (a Chunked receiver takes them for the end
# marker), random after them.
make_image src.img $SIZE
dd if=/dev/zero of=src.img bs=12 count=1 conv=notrunc status=none
fill_output() { $PY -c 'import sys; open(sys.argv[1],"wb").write(b"\x5c" * int(sys.argv[2]))' out.img $SIZE; }
fill_output
untouched=$(sha256sum <out.img)

# serve_once LOG [ARGS...]: a one-connection HTTP import into out.img on a fresh port.
serve_once() {
  local log=$1
  shift
  port=$(free_port)
  start_serve "$log" --listen tcp://127.0.0.1:$port --http --output out.img --once "$@"
}
URL_PATH="/import_raw_vdi?vdi=OpaqueRef:1&session_id=s"

# --- accepted: the framing the sender asked for ---------------------------------------
for protocol in raw chunked; do
  fill_output
  serve_once accept-$protocol.log || exit 1
  copy=0 serve=0
  "$SLUICE" copy --protocol $protocol src.img "http://127.0.0.1:$port$URL_PATH" 2>copy-$protocol.log || copy=$?
  wait "$SERVE_PID" || serve=$?
  if [ $copy -eq 0 ] && [ $serve -eq 0 ] && cmp src.img out.img; then
    pass "$protocol sender, serve --http without --protocol: both exit 0, the image landed"
  else
    fail "$protocol sender: copy $copy, serve $serve: $(cat copy-$protocol.log) / $(cat accept-$protocol.log)"
  fi
done

# --- refused: the framing contradicts serve --protocol --------------------------------
refused_framing() {  # refused_framing SENDER_PROTOCOL SERVE_PROTOCOL
  fill_output
  serve_once refuse-$1.log --protocol "$2" || exit 1
  local copy=0 serve=0
  "$SLUICE" copy --protocol "$1" src.img "http://127.0.0.1:$port$URL_PATH" 2>copy-refuse-$1.log || copy=$?
  wait "$SERVE_PID" || serve=$?
  if [ $copy -eq 1 ] && [ $serve -eq 1 ] && grep -q "400 Bad Request" copy-refuse-$1.log &&
      grep -q "asks for a $1 body" refuse-$1.log && [ "$(sha256sum <out.img)" = "$untouched" ]; then
    pass "$1 sender into serve --http --protocol $2: 400, both exit 1, nothing written"
  else
    fail "$1 sender into --protocol $2: copy $copy, serve $serve, output $( [ "$(sha256sum <out.img)" = "$untouched" ] && echo untouched || echo CHANGED): $(cat copy-refuse-$1.log) / $(cat refuse-$1.log)"
  fi
}
refused_framing raw chunked
refused_framing chunked raw

# --- curl, a plain HTTP client: a raw body with its Content-Length ---------------------
fill_output
serve_once curl.log || exit 1
code=$(curl -sS -o curl.body -w '%{http_code}' -H 'Expect:' -T src.img "http://127.0.0.1:$port$URL_PATH" 2>curl.err)
serve=0
wait "$SERVE_PID" || serve=$?
if [ "$code" = 200 ] && [ $serve -eq 0 ] && cmp src.img out.img; then
  pass "curl -T (raw, Content-Length $SIZE): 200, serve exits 0, the image landed"
else
  fail "curl raw import: HTTP $code, serve $serve: $(cat curl.err) / $(cat curl.log)"
fi

# curl_refused NAME CODE LOGTEXT PATH CURL_ARGS...: the answer to a PUT of PATH, serve's
# exit 1, its log line, and the output untouched.
curl_refused() {
  local name=$1 want=$2 text=$3 path=$4 got serve=0
  shift 4
  fill_output
  serve_once "curl-$name.log" || exit 1
  got=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Expect:' "$@" "http://127.0.0.1:$port$path" 2>/dev/null)
  wait "$SERVE_PID" || serve=$?
  if [ "$got" = "$want" ] && [ $serve -eq 1 ] && grep -q -- "$text" "curl-$name.log" &&
      [ "$(sha256sum <out.img)" = "$untouched" ]; then
    pass "$name: $want, serve exits 1, nothing written"
  else
    fail "$name: HTTP $got (want $want), serve $serve: $(cat "curl-$name.log")"
  fi
}
head -c 4096 src.img >short.img
curl_refused "a Content-Length other than the image's size" 400 "Content-Length 4096 is not the image's size" \
  "$URL_PATH" -T short.img
curl_refused "a path that is not an import path" 404 "No import at '/import'" "/import?vdi=x" -T src.img
curl_refused "a Transfer-Encoding header" 404 "Transfer-Encoding 'chunked' is not supported" "$URL_PATH" \
  -T src.img -H 'Transfer-Encoding: chunked'
curl_refused "format=vhd" 404 "format=vhd is not supported" "$URL_PATH&format=vhd" -T src.img

# --- --http-path adds an import path ---------------------------------------------------
fill_output
serve_once http-path.log --http-path /upload || exit 1
copy=0 serve=0
"$SLUICE" copy src.img "http://127.0.0.1:$port/upload" 2>copy-http-path.log || copy=$?
wait "$SERVE_PID" || serve=$?
if [ $copy -eq 0 ] && [ $serve -eq 0 ] && cmp src.img out.img; then
  pass "--http-path /upload: a Chunked import there lands"
else
  fail "--http-path: copy $copy, serve $serve: $(cat copy-http-path.log) / $(cat http-path.log)"
fi

# --- a Chunked stream with bytes after its end marker is not a success -----------------
fill_output
port=$(free_port)
start_serve trailing.log --listen tcp://127.0.0.1:$port --protocol chunked --output out.img --once || exit 1
$PY "$CRAFT" 127.0.0.1:$port after-terminator >/dev/null 2>&1
serve=0
wait "$SERVE_PID" || serve=$?
if [ $serve -eq 1 ] && grep -q "bytes follow the Chunked end marker at stream byte 4108 (at least" trailing.log; then
  pass "bytes after the Chunked end marker: serve exits 1 naming where and how many"
else
  fail "bytes after the end marker: serve $serve: $(cat trailing.log)"
fi
finish
