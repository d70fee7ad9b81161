#!/bin/bash
# --timeout on stream destinations: a receiver that accepts and then stops reading, an
# HTTP server that never answers the PUT, a TLS port that never answers the handshake,
# and a listener that never accepts. Each copy must fail with exit 1 and a message
# naming what stalled, soon after the timeout, never hang.
source "$SOURCE_ROOT/tests/integration/stream_lib.sh"

# A peer that accepts (or, with "no-accept", only listens with a full queue) and
# then does nothing at all; "http" reads the request head first.
stall_server() {
  local port=$1 mode=$2
  $PY - "$port" "$mode" <<'PYEOF' &
import socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
if mode == "no-accept":
    # A backlog of 0 holds one connection; a second one fills the queue, so the
    # kernel drops further connection requests (SYNs) instead of answering them.
    s.listen(0)
    fillers = []
    for _ in range(2):
        c = socket.socket(); c.setblocking(False)
        try: c.connect(("127.0.0.1", port))
        except BlockingIOError: pass
        fillers.append(c)
    time.sleep(120)
    sys.exit(0)
s.listen(4)
c, _ = s.accept()
# Small buffers so a stalled reader fills them quickly.
if mode == "http":
    head = b""
    while b"\r\n\r\n" not in head:
        more = c.recv(4096)
        if not more: break
        head += more
time.sleep(120)
PYEOF
  SERVER_PIDS+=($!)
}

make_image src.img $((64 << 20))

# expect_timeout NAME URI PATTERN [options]: the copy fails within the bound, naming PATTERN.
# The bound is --timeout 2 unless LIMIT says otherwise.
expect_timeout() {
  local name=$1 uri=$2 pattern=$3; shift 3
  local start=$SECONDS rc=0 limit=${LIMIT:---timeout 2}
  # shellcheck disable=SC2086 # the limit is a flag and its value
  timeout 60 "$SLUICE" copy $limit "$@" src.img "$uri" 2>err.txt || rc=$?
  local took=$((SECONDS - start))
  if [ "$rc" -ne 1 ]; then fail "$name: exit $rc, expected 1 ($(cat err.txt))"; return; fi
  if ! grep -q "$pattern" err.txt; then fail "$name: message does not say '$pattern': $(cat err.txt)"; return; fi
  if [ "$took" -gt 20 ]; then fail "$name: took ${took}s with $limit"; return; fi
  pass "$name: exit 1 after ${took}s: $(tail -1 err.txt)"
}

port=$(free_port); stall_server "$port" read
wait_listening "tcp://127.0.0.1:$port"
expect_timeout "receiver stops reading (tcp)" "tcp://127.0.0.1:$port" "the peer stopped reading"

port=$(free_port); stall_server "$port" read
wait_listening "tcp://127.0.0.1:$port"
expect_timeout "receiver stops reading (raw)" "tcp://127.0.0.1:$port" "the peer stopped reading" --protocol raw

port=$(free_port); stall_server "$port" http
wait_listening "tcp://127.0.0.1:$port"
expect_timeout "HTTP server never answers" "http://127.0.0.1:$port/import" "HTTP request (waiting for its answer)"

port=$(free_port); stall_server "$port" read
wait_listening "tcp://127.0.0.1:$port"
expect_timeout "TLS handshake never answered" "tls://127.0.0.1:$port" "TLS handshake did not finish" --tls-no-verify

port=$(free_port); stall_server "$port" no-accept
wait_listening "tcp://127.0.0.1:$port"
sleep 0.3  # let the fillers take the queue
expect_timeout "connection never accepted" "tcp://127.0.0.1:$port" "no answer within 2 seconds"

# Without --timeout, connecting and the handshakes are still bounded (--connect-timeout,
# 30 s by default): a silent peer cannot hold a copy that has not started forever.
port=$(free_port); stall_server "$port" http
wait_listening "tcp://127.0.0.1:$port"
LIMIT="--connect-timeout 2" expect_timeout "HTTP server never answers, no --timeout" "http://127.0.0.1:$port/import" \
  "HTTP request (waiting for its answer) did not finish within 2 seconds (--connect-timeout)"

port=$(free_port); stall_server "$port" read
wait_listening "tcp://127.0.0.1:$port"
LIMIT="--connect-timeout 2" expect_timeout "TLS handshake never answered, no --timeout" "tls://127.0.0.1:$port" \
  "TLS handshake did not finish within 2 seconds (--connect-timeout)" --tls-no-verify

# The smaller limit wins: --timeout 2 under the default --connect-timeout of 30.
port=$(free_port); stall_server "$port" read
wait_listening "tcp://127.0.0.1:$port"
expect_timeout "TLS handshake, --timeout under --connect-timeout" "tls://127.0.0.1:$port" \
  "did not finish within 2 seconds (--timeout)" --tls-no-verify

# Without --timeout nothing changes for a healthy receiver: a real transfer still
# completes and verifies (the deadline must not fire on a slow start).
port=$(free_port)
"$SLUICE" serve --listen "tcp://127.0.0.1:$port" --output out.img --size $((64 << 20)) --once 2>serve.err &
SERVER_PIDS+=($!)
wait_listening "tcp://127.0.0.1:$port"
if "$SLUICE" copy --timeout 10 src.img "tcp://127.0.0.1:$port" 2>copy.err && wait "${SERVER_PIDS[-1]}" &&
   cmp -s src.img out.img; then
  pass "a healthy transfer with --timeout 10 completes and matches"
else
  fail "healthy transfer with --timeout: $(cat copy.err serve.err)"
fi

# The receiving side: a client that connects to `serve --listen tls://` and never starts
# the handshake is dropped after --handshake-timeout, and the log says so (it used to
# say the client had closed the connection); the server goes on serving.
make_certs certs
port=$(free_port)
start_serve tls-stall.log --listen "tls://127.0.0.1:$port" --output null: --size 1M --handshake-timeout 1 \
  --tls-cert certs/server-cert.pem --tls-key certs/server-key.pem || exit 1
$PY -c 'import socket, sys, time; s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); time.sleep(4)' \
  "$port" &
stalled=$!
for _ in $(seq 60); do grep -q "handshake" tls-stall.log && break; sleep 0.1; done
if grep -q "the TLS handshake did not finish within 1 seconds (--handshake-timeout)" tls-stall.log; then
  pass "serve drops a client stalled in the TLS handshake: $(grep handshake tls-stall.log | head -1)"
else
  fail "serve --handshake-timeout: $(cat tls-stall.log)"
fi
kill "$stalled" 2>/dev/null
make_image sector.img 512
"$SLUICE" copy --tls-ca certs/ca-cert.pem sector.img "tls://127.0.0.1:$port" 2>copy.err ||
  fail "a transfer after the stalled client failed: $(cat copy.err)"
kill "$SERVE_PID"

finish
