#!/bin/bash
# The socket options issue 3 promises, observed from outside the process:
#  1. TCP_NODELAY is set on both ends by default and left off with --no-nodelay (strace).
#  2. MSG_MORE / SPLICE_F_MORE and TCP_CORK only while more is known to follow, never on
#     the last write of a burst. Sluice sends through io_uring, so strace never sees the
#     flags: an LD_PRELOAD shim reads each submission queue entry as liburing submits
#     it, and logs setsockopt(TCP_CORK) and shutdown() alongside.
#  3. SNI: the host name of tls:// and https:// destinations (or --tls-hostname), never
#     an IP literal (RFC 6066, section 3), recorded by a Python TLS receiver.
#  4. --tls-ciphers under TLS 1.2 (and --tls-ciphersuites under 1.3): the suite asked for
#     is the one negotiated, and lists that do not overlap fail clearly.
# Every transfer that succeeds is compared with its source.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"

SKIPPED=()
skip() { echo "skip: $*"; SKIPPED+=("$1"); }

make_certs certs || { echo "cannot make test certificates" >&2; exit 1; }
TLS_SERVE=(--tls-cert certs/server-cert.pem --tls-key certs/server-key.pem)
make_image sector.img 512
make_image dense.img $((3 * 1024 * 1024))
# Scattered 4 KiB extents: with --prezeroed, many small chunks queue up behind each
# other, so writes go out in bursts of several frames (the case MSG_MORE is for).
$PY - frag.img <<'PYEOF'
import os, sys
with open(sys.argv[1], "wb") as f:
    f.truncate(8 << 20)
    for i in range(48):
        f.seek(i * 168 * 1024); f.write(os.urandom(4096))
PYEOF

# serve_under LOG WRAPPER... -- SERVE-ARGS...: sluice serve in the background under a
# wrapper (strace, env); SERVE_PID is the wrapper's pid, and sluice's is killed by the
# cleanup too (a killed strace would leave its tracee running).
serve_under() {
  local log=$1 wrap=() listen children=()
  shift
  while [ "$1" != -- ]; do wrap+=("$1"); shift; done
  shift
  "${wrap[@]}" "$SLUICE" serve "$@" >"$log.out" 2>"$log" &
  SERVE_PID=$!
  SERVER_PIDS+=("$SERVE_PID")
  listen=$(printf '%s\n' "$@" | grep -A1 -x -- --listen | tail -1)
  wait_listening "$listen" || return 1
  read -r -a children <<<"$(cat /proc/"$SERVE_PID"/task/*/children 2>/dev/null)"
  SERVER_PIDS+=("${children[@]}")
}

# transfer NAME IMAGE DEST COPY-ARGS...: sluice copy --stats (under COPY_WRAP) to the
# --once server started last; both must succeed and out.img must hold IMAGE.
COPY_WRAP=(env)
transfer() {
  local name=$1 image=$2 dest=$3 status=0
  shift 3
  "${COPY_WRAP[@]}" "$SLUICE" copy --stats "$@" "$image" "$dest" >stats.json 2>copy.log || status=$?
  # A copy that never reached the --once server would leave it waiting for ever.
  [ "$status" = 0 ] || { fail "$name: copy exited $status: $(cat copy.log)"; kill "${SERVER_PIDS[@]}" 2>/dev/null; }
  wait "$SERVE_PID" || fail "$name: serve exited $?: $(cat serve.log)"
  same_image "$image" out.img || { fail "$name: the received image differs"; return 1; }
  [ "$status" = 0 ]
}

# endpoints TRANSPORT: LISTEN, DEST and the TLS options of each end for tcp, tls, http,
# https and unix, on a fresh port.
endpoints() {
  local port
  port=$(free_port)
  SERVE_EXTRA=() COPY_EXTRA=()
  case $1 in
    tcp) LISTEN=tcp://127.0.0.1:$port DEST=tcp://127.0.0.1:$port ;;
    tls) LISTEN=tls://127.0.0.1:$port DEST=tls://localhost:$port SERVE_EXTRA=("${TLS_SERVE[@]}")
      COPY_EXTRA=(--tls-ca certs/ca-cert.pem) ;;
    http) LISTEN=tcp://127.0.0.1:$port DEST="http://127.0.0.1:$port/import_raw_vdi?vdi=x" SERVE_EXTRA=(--http) ;;
    https) LISTEN=tls://127.0.0.1:$port DEST="https://localhost:$port/import_raw_vdi?vdi=x"
      SERVE_EXTRA=(--http "${TLS_SERVE[@]}") COPY_EXTRA=(--tls-ca certs/ca-cert.pem) ;;
    unix) rm -f "$WORK/s.sock"; LISTEN=unix://$WORK/s.sock DEST=unix://$WORK/s.sock ;;
  esac
}

# --- 1. TCP_NODELAY ------------------------------------------------------------------
# LeakSanitizer cannot run under ptrace and then fails the process at exit (sometimes);
# leaks are the rest of the suite's to find, not this traced one's.
TRACED_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
NODELAY_ON='setsockopt\([0-9]+, (SOL_TCP|IPPROTO_TCP), TCP_NODELAY, \[1\], 4\) = 0'
NODELAY_OFF='setsockopt\([0-9]+, (SOL_TCP|IPPROTO_TCP), TCP_NODELAY, \[0\], 4\) = 0'
# nodelay_case NAME TRANSPORT EXPECT(on|off|none) OPTIONS...: both ends traced, each with
# OPTIONS (--no-nodelay or nothing). A Unix socket has no Nagle algorithm to turn off.
nodelay_case() {
  local name=$1 transport=$2 want=$3 side trace
  shift 3
  endpoints "$transport"
  rm -f out.img serve.strace copy.strace
  serve_under serve.log env ASAN_OPTIONS="$TRACED_ASAN_OPTIONS" strace -f -qq -e trace=setsockopt -o serve.strace -- --listen "$LISTEN" --once \
    --output out.img --size 8M "${SERVE_EXTRA[@]}" "$@" || { fail "$name: serve did not start: $(cat serve.log)"; return; }
  COPY_WRAP=(env ASAN_OPTIONS="$TRACED_ASAN_OPTIONS" strace -f -qq -e trace=setsockopt -o copy.strace)
  transfer "$name" dense.img "$DEST" "${COPY_EXTRA[@]}" "$@"
  COPY_WRAP=(env)
  for side in serve copy; do
    trace=$side.strace
    case $want in
      on) grep -Eq "$NODELAY_ON" "$trace" || fail "$name: $side never set TCP_NODELAY to 1: $(grep NODELAY "$trace")" ;;
      off) ! grep -Eq "$NODELAY_ON" "$trace" || fail "$name: $side set TCP_NODELAY to 1 despite --no-nodelay" ;;
      none) ! grep -q TCP_NODELAY "$trace" || fail "$name: $side set TCP_NODELAY on a Unix socket: $(grep NODELAY "$trace")" ;;
    esac
  done
  pass "$name: TCP_NODELAY=$want on both ends ($(grep -Ehoc "$NODELAY_ON" serve.strace copy.strace | paste -sd/) set to 1, $(grep -Ehoc "$NODELAY_OFF" serve.strace copy.strace | paste -sd/) to 0 by serve/copy)"
}
if ! command -v strace >/dev/null || ! strace -f -qq -o /dev/null true 2>/dev/null; then
  skip "TCP_NODELAY (strace missing or cannot trace here)"
else
  nodelay_case "tcp, defaults" tcp on
  nodelay_case "tcp, --no-nodelay" tcp off --no-nodelay
  nodelay_case "tls, defaults" tls on
  nodelay_case "tls, --no-nodelay" tls off --no-nodelay
  nodelay_case "unix" unix none
fi

# --- 2. MSG_MORE and TCP_CORK ----------------------------------------------------------
# sqe_log.c, preloaded into both ends, logs each socket send as io_uring submits it;
# check_sends.py holds each end's log to the rules (it says them).
HERE="$SOURCE_ROOT/tests/integration"

# The in-memory rule can fail: a header sent apart from its payload must be caught, the
# same lengths with the header joined to its payload must not, nor the terminator.
printf '%s\n' "1 send 5 tcp 4108 last" "1 send 5 tcp 12 last" "1 send 5 tcp 512 last" "1 send 5 tcp 12 last" >lone.sqe
printf '%s\n' "1 send 5 tcp 4108 last" "1 send 5 tcp 524 last" "1 send 5 tcp 12 last" >joined.sqe
if result=$($PY "$HERE/check_sends.py" lone.sqe memory); then
  fail "check_sends.py passed a lone 12-byte header in memory mode: $result"
elif [ "$result" != "lone.sqe:2 (pid 1 fd 5): a 12-byte send before the end: a chunk header apart from its payload" ]; then
  fail "check_sends.py on a lone header: $result"
elif ! result=$($PY "$HERE/check_sends.py" joined.sqe memory); then
  fail "check_sends.py refused headers sent with their payloads: $result"
else
  pass "check_sends.py memory mode: flags a lone header, passes joined ones"
fi
# The same rule for a sender that splices: the header goes into the pipe ahead of the
# payload, so the splice carries both; a header sent on its own before it is caught.
printf '%s\n' "1 cork 5 tcp 1" "1 send 5 tcp 12 more" "1 splice 5 tcp 4096 last" "1 cork 5 tcp 0" \
  "1 send 5 tcp 12 last" >lone-splice.sqe
printf '%s\n' "1 cork 5 tcp 1" "1 splice 5 tcp 4108 last" "1 cork 5 tcp 0" "1 send 5 tcp 12 last" >joined-splice.sqe
if result=$($PY "$HERE/check_sends.py" lone-splice.sqe splicing); then
  fail "check_sends.py passed a lone 12-byte header in splicing mode: $result"
elif [ "$result" != "lone-splice.sqe:2 (pid 1 fd 5): a 12-byte send before the end: a chunk header apart from its payload" ]; then
  fail "check_sends.py on a lone header before a splice: $result"
elif ! result=$($PY "$HERE/check_sends.py" joined-splice.sqe splicing); then
  fail "check_sends.py refused a header spliced with its payload: $result"
else
  pass "check_sends.py splicing mode: flags a lone header, passes one spliced with its payload"
fi

# more_case NAME TRANSPORT IMAGE splicing|sending|memory COPY-OPTIONS...: both ends run
# with the shim; both logs must keep the rules ("splicing": the sender splices payloads;
# "memory": it reads them into memory, --no-zero-copy).
more_case() {
  local name=$1 transport=$2 image=$3 mode=$4 side result want
  shift 4
  endpoints "$transport"
  rm -f out.img serve.sqe copy.sqe
  serve_under serve.log env ASAN_OPTIONS="$PRELOAD_ASAN_OPTIONS" SQE_LOG="$WORK/serve.sqe" LD_PRELOAD="$WORK/sqe_log.so" -- --listen "$LISTEN" --once \
    --output out.img --size 8M "${SERVE_EXTRA[@]}" || { fail "$name: serve did not start: $(cat serve.log)"; return; }
  COPY_WRAP=(env ASAN_OPTIONS="$PRELOAD_ASAN_OPTIONS" SQE_LOG="$WORK/copy.sqe" LD_PRELOAD="$WORK/sqe_log.so")
  transfer "$name" "$image" "$DEST" "${COPY_EXTRA[@]}" "$@"
  COPY_WRAP=(env)
  for side in copy serve; do
    want=receiving
    [ "$side" = copy ] && want=$mode
    if result=$($PY "$HERE/check_sends.py" "$side.sqe" "$want"); then pass "$name, $side: $result"; else fail "$name, $side: $result"; fi
  done
}
# Under ASan the sanitizer's runtime insists on being loaded first; the shim loaded
# before it intercepts nothing ASan needs, so the check is turned off, not the shim.
PRELOAD_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
CC_FOUND=$(command -v "${CC:-cc}" || command -v gcc || command -v clang || true)
if [ -z "$CC_FOUND" ] || ! "$CC_FOUND" -shared -fPIC -O1 -o sqe_log.so "$HERE/sqe_log.c" -ldl 2>cc.log; then
  skip "MSG_MORE and TCP_CORK (cannot build the LD_PRELOAD shim: $(head -c 300 cc.log 2>/dev/null))"
else
  more_case "tcp, one sector, zero copy" tcp sector.img splicing
  # One chunk and the terminator: the header rides with its payload (MSG_MORE, then the
  # cork), the terminator follows; a header leaving alone would make a third segment.
  segments=$(json_field stats.json tcp_segments)
  if [ -n "$segments" ] && [ "$segments" -ge 1 ] && [ "$segments" -le 2 ]; then
    pass "tcp, one sector: $segments TCP segment(s) for one chunk and the terminator"
  else
    fail "tcp, one sector: $segments TCP segments for one 512-byte chunk and the terminator (at most 2)"
  fi
  more_case "tcp, scattered chunks, zero copy" tcp frag.img splicing --prezeroed
  # Through memory each header goes out in the same send as its payload: only the
  # terminator may be a 12-byte send.
  more_case "tcp, scattered chunks, through memory" tcp frag.img memory --prezeroed --no-zero-copy
  more_case "tcp, one sector, through memory" tcp sector.img memory --no-zero-copy
  more_case "tcp, dense, through memory" tcp dense.img memory --no-zero-copy
  more_case "tcp, dense" tcp dense.img splicing
  more_case "http, scattered chunks" http frag.img splicing --prezeroed
  more_case "tls, scattered chunks" tls frag.img sending --prezeroed
  more_case "https, one sector" https sector.img sending
  more_case "unix, scattered chunks" unix frag.img splicing --prezeroed
fi

# --- 3. SNI ------------------------------------------------------------------------------
# A Chunked receiver behind Python's ssl module; its sni_callback records the name the
# client sent ("<none>" without the extension).
cat >sni_server.py <<'PYEOF'
import os, socket, ssl, struct, sys
port_file, cert, key, record, output, http, host = sys.argv[1:8]
names = []
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
context.sni_callback = lambda sock, name, ctx: names.append(name)
listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
listener.bind((host, 0))
listener.listen(1)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % listener.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
listener.settimeout(30)
raw, _ = listener.accept()
raw.settimeout(30)
conn = context.wrap_socket(raw, server_side=True)
with open(record, "w") as f:
    f.write("|".join("<none>" if n is None else n for n in names) + "\n")

def exactly(n):
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            sys.exit("the stream ended early")
        data += more
    return data

if http == "http":
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += exactly(1)
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
fd = os.open(output, os.O_RDWR | os.O_CREAT, 0o644)
while True:
    offset, length = struct.unpack("<QI", exactly(12))
    if offset == 0 and length == 0:
        break
    os.pwrite(fd, exactly(length), offset)
os.fsync(fd)
os.close(fd)
conn.close()
PYEOF

# sni_case NAME WANT LISTEN-HOST plain|http DEST-PREFIX DEST-SUFFIX COPY-OPTIONS...
sni_case() {
  local name=$1 want=$2 host=$3 http=$4 prefix=$5 suffix=$6 server status=0 i got
  shift 6
  rm -f port sni.txt out.img
  $PY sni_server.py port certs/server-cert.pem certs/server-key.pem sni.txt out.img "$http" "$host" 2>sni.log &
  server=$!
  SERVER_PIDS+=("$server")
  for i in $(seq 1 200); do [ -s port ] && break; kill -0 "$server" 2>/dev/null || break; sleep 0.05; done
  [ -s port ] || { fail "$name: the Python receiver did not start: $(cat sni.log)"; return; }
  "$SLUICE" copy "$@" dense.img "$prefix$(cat port)$suffix" 2>copy.log || status=$?
  wait "$server" || fail "$name: the Python receiver failed: $(cat sni.log)"
  [ "$status" = 0 ] || fail "$name: copy exited $status: $(cat copy.log)"
  got=$(cat sni.txt 2>/dev/null)
  if [ "$got" != "$want" ]; then
    fail "$name: the receiver saw SNI '$got', expected '$want'"
  elif same_image dense.img out.img; then
    pass "$name: SNI '$got'"
  else
    fail "$name: SNI '$got', but the received image differs"
  fi
}
sni_case "tls://localhost, verified" localhost 127.0.0.1 plain tls://localhost: "" --tls-ca certs/ca-cert.pem
sni_case "tls://localhost, --tls-no-verify" localhost 127.0.0.1 plain tls://localhost: "" --tls-no-verify
sni_case "https://localhost" localhost 127.0.0.1 http https://localhost: /import_raw_vdi?vdi=x --tls-ca certs/ca-cert.pem
sni_case "tls://127.0.0.1, verified: no SNI for an IP literal" "<none>" 127.0.0.1 plain tls://127.0.0.1: "" \
  --tls-ca certs/ca-cert.pem
sni_case "tls://127.0.0.1, --tls-no-verify: no SNI" "<none>" 127.0.0.1 plain tls://127.0.0.1: "" --tls-no-verify
sni_case "--tls-hostname to an IP address" server.example 127.0.0.1 plain tls://127.0.0.1: "" \
  --tls-no-verify --tls-hostname server.example
if $PY -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
  sni_case "tls://[::1]: no SNI" "<none>" ::1 plain "tls://[::1]:" "" --tls-no-verify
else
  echo "note: no IPv6 loopback here, tls://[::1] not tried"
fi

# --- 4. Cipher choice --------------------------------------------------------------------
# The test certificates are ECDSA (P-256): ECDHE-ECDSA suites. Sluice's server takes its
# own order (SSL_OP_CIPHER_SERVER_PREFERENCE), so a server offering AES-256 first picks
# AES-256 unless the client's --tls-ciphers leaves it out.
# wait_for_line PATTERN COUNT: until serve.log has COUNT lines matching PATTERN (5 s at most).
wait_for_line() {
  local i
  for i in $(seq 1 100); do [ "$(grep -c -- "$1" serve.log)" -ge "$2" ] && return 0; sleep 0.05; done
  return 1
}
negotiated() {  # negotiated NAME WANT: stats.json and serve.log name WANT
  local name=$1 want=$2 got
  got=$(json_field stats.json tls_cipher)
  if [ "$got" = "$want" ] && tail -1 serve.log | grep -qF "over TLS $want into out.img (flushed)"; then
    pass "$name: $want"
  else
    fail "$name: --stats says '$got', serve says '$(tail -1 serve.log)', expected $want"
  fi
}
refused() {  # refused NAME COPY-MESSAGE SERVE-MESSAGE COPY-OPTIONS...
  local name=$1 copy_message=$2 serve_message=$3 status=0 before=0
  shift 3
  cp out.img kept.img
  [ -n "$serve_message" ] && before=$(grep -cF -- "$serve_message" serve.log)
  "$SLUICE" copy "$@" dense.img "$DEST" >/dev/null 2>copy.log || status=$?
  [ -n "$serve_message" ] && wait_for_line "$serve_message" $((before + 1))
  if [ "$status" != 1 ]; then
    fail "$name: copy exited $status, expected 1: $(cat copy.log)"
  elif ! grep -qF -- "$copy_message" copy.log; then
    fail "$name: the sender's error lacks '$copy_message': $(cat copy.log)"
  elif [ -n "$serve_message" ] && [ "$(grep -cF -- "$serve_message" serve.log)" -le "$before" ]; then
    fail "$name: serve's log lacks '$serve_message': $(cat serve.log)"
  else
    pass "$name: $(cat copy.log)"
  fi
  cmp -s out.img kept.img || fail "$name: the output changed"
}

port=$(free_port)
LISTEN=tls://127.0.0.1:$port DEST=tls://localhost:$port
rm -f out.img
serve_under serve.log env -- --listen "$LISTEN" --output out.img --size 8M "${TLS_SERVE[@]}" --tls12 \
  --tls-ciphers ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305 ||
  fail "cipher server did not start: $(cat serve.log)"
cipher_copy() {  # cipher_copy NAME WANT COPY-OPTIONS...: to the long-running server above
  local name=$1 want=$2 status=0 before
  shift 2
  rm -f out.img
  before=$(grep -c "flushed)$" serve.log)
  "$SLUICE" copy --stats --tls-ca certs/ca-cert.pem "$@" dense.img "$DEST" >stats.json 2>copy.log || status=$?
  if [ "$status" != 0 ]; then fail "$name: copy exited $status: $(cat copy.log)"; return; fi
  # serve may report after the sender has exited.
  wait_for_line "flushed)$" $((before + 1))
  same_image dense.img out.img || fail "$name: the received image differs"
  negotiated "$name" "$want"
}
cipher_copy "TLS 1.2, server's order" ECDHE-ECDSA-AES256-GCM-SHA384 --tls12
cipher_copy "TLS 1.2, --tls12 --tls-ciphers AES128-GCM" ECDHE-ECDSA-AES128-GCM-SHA256 --tls12 \
  --tls-ciphers ECDHE-ECDSA-AES128-GCM-SHA256
cipher_copy "TLS 1.2 (the server's limit), --tls-ciphers CHACHA20" ECDHE-ECDSA-CHACHA20-POLY1305 \
  --tls-ciphers ECDHE-ECDSA-CHACHA20-POLY1305
cipher_copy "TLS 1.2, a list with one shared suite" ECDHE-ECDSA-AES128-GCM-SHA256 --tls12 \
  --tls-ciphers ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256
refused "TLS 1.2, no shared suite" "TLS handshake with" "no shared cipher" --tls12 --tls-ca certs/ca-cert.pem \
  --tls-ciphers ECDHE-ECDSA-AES128-SHA
grep -q "handshake failure" copy.log || fail "TLS 1.2, no shared suite: the sender does not name the handshake failure"
grep -q "no cipher suite or TLS version in common with the peer (--tls-ciphers" copy.log ||
  fail "TLS 1.2, no shared suite: the sender gives no hint at the options: $(cat copy.log)"
grep -q "no shared cipher (no cipher suite or TLS version in common" serve.log ||
  fail "TLS 1.2, no shared suite: serve gives no hint: $(cat serve.log)"
refused "TLS 1.2, RSA suites for an ECDSA certificate" "TLS handshake with" "no shared cipher" --tls12 \
  --tls-ca certs/ca-cert.pem --tls-ciphers ECDHE-RSA-AES128-GCM-SHA256
refused "an unknown cipher name" "invalid TLS cipher list 'NO-SUCH-CIPHER'" "" --tls12 --tls-ca certs/ca-cert.pem \
  --tls-ciphers NO-SUCH-CIPHER
# The refusals did not stop the server (no --once).
cipher_copy "after the refusals" ECDHE-ECDSA-AES128-GCM-SHA256 --tls-ciphers ECDHE-ECDSA-AES128-GCM-SHA256
kill "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null

# TLS 1.3: --tls-ciphersuites, on both ends.
for suites in TLS_CHACHA20_POLY1305_SHA256:copy TLS_AES_256_GCM_SHA384:serve; do
  IFS=: read -r suite side <<<"$suites"
  endpoints tls
  serve_opts=() copy_opts=()
  if [ "$side" = copy ]; then copy_opts=(--tls-ciphersuites "$suite"); else serve_opts=(--tls-ciphersuites "$suite"); fi
  rm -f out.img
  serve_under serve.log env -- --listen "$LISTEN" --once --output out.img --size 8M "${TLS_SERVE[@]}" \
    "${serve_opts[@]}" || { fail "TLS 1.3 server did not start: $(cat serve.log)"; continue; }
  transfer "TLS 1.3, $side --tls-ciphersuites $suite" dense.img "$DEST" "${COPY_EXTRA[@]}" "${copy_opts[@]}" &&
    negotiated "TLS 1.3, $side --tls-ciphersuites $suite" "$suite"
done

if [ "$FAILURES" -eq 0 ] && [ "${#SKIPPED[@]}" -gt 0 ]; then
  echo "skipped: ${SKIPPED[*]}"
  exit 77
fi
finish
