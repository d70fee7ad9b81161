# Shared helpers for the Chunked/raw stream integration tests (sourced, not run).
# Needs SLUICE, SOURCE_ROOT (set by meson); works in a scratch directory it removes.
set -u
PY=/usr/bin/python3
REFERENCE="$SOURCE_ROOT/tests/integration/vhd_tool_reference.py"
WORK=$(mktemp -d "${SLUICE_TEST_DIR:-/var/tmp}/sluice-stream.XXXXXX")
SERVER_PIDS=()
cleanup() {
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1

FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }
finish() { [ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }; exit 0; }

free_port() {
  $PY "$SOURCE_ROOT/tests/integration/free_port.py"
}

. "$SOURCE_ROOT/tests/integration/listening.sh"

# make_image PATH SIZE [sparse]: random data, with holes when "sparse": data at the
# start, in the middle and in the (possibly partial) last sector.
make_image() {
  $PY - "$1" "$2" "${3:-}" <<'PYEOF'
import os, sys
path, size, sparse = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "sparse"
with open(path, "wb") as f:
    f.truncate(size)
    if not sparse:
        left = size
        while left:
            n = min(left, 1 << 20); f.write(os.urandom(n)); left -= n
    else:
        for at, n in ((0, 3 * 1024 * 1024 + 4000), (size // 2 // 4096 * 4096, 70000), (max(0, size - 900), 900)):
            n = min(n, size - at)
            f.seek(at); f.write(os.urandom(n))
PYEOF
}

# make_certs DIR: a CA, a server certificate for localhost/127.0.0.1, a client
# certificate, and an unrelated CA, with the openssl command line.
make_certs() {
  local d=$1
  mkdir -p "$d"
  (
    cd "$d" || exit 1
    for ca in ca other-ca; do
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $ca-key.pem \
        -out $ca-cert.pem -days 2 -subj "/CN=Sluice test $ca" >/dev/null 2>&1 || exit 1
    done
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for who in server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $who-key.pem -out $who.csr \
        -subj "/CN=$who" >/dev/null 2>&1 || exit 1
      openssl x509 -req -in $who.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial -out $who-cert.pem \
        -days 2 -extfile $who.ext >/dev/null 2>&1 || exit 1
    done
  )
}

# stream_endpoints TRANSPORT: for tcp, unix (a socket in $WORK) or tls, sets LISTEN
# (serve --listen) and DEST (copy's destination), and the options each side needs for
# TLS, TLS_SERVE and TLS_COPY (certificates from `make_certs certs`).
stream_endpoints() {
  local port
  TLS_SERVE=() TLS_COPY=()
  case $1 in
    tcp) port=$(free_port) LISTEN=tcp://127.0.0.1:$port DEST=tcp://127.0.0.1:$port ;;
    unix) rm -f "$WORK/stream.sock"; LISTEN=unix://$WORK/stream.sock DEST=unix://$WORK/stream.sock ;;
    tls) port=$(free_port) LISTEN=tls://127.0.0.1:$port DEST=tls://localhost:$port
      TLS_SERVE=(--tls-cert certs/server-cert.pem --tls-key certs/server-key.pem)
      TLS_COPY=(--tls-ca certs/ca-cert.pem) ;;
  esac
}

# start_serve LOG ARGS...: sluice serve in the background; SERVE_PID is its pid.
start_serve() {
  local log=$1
  shift
  "$SLUICE" serve "$@" >"$log.out" 2>"$log" &
  SERVE_PID=$!
  SERVER_PIDS+=("$SERVE_PID")
  local listen
  listen=$(printf '%s\n' "$@" | grep -A1 -x -- --listen | tail -1)
  wait_listening "$listen"
}

# same_image SOURCE OUTPUT: the output holds the source's bytes (an output may be
# longer: vhd-tool writes a padded last sector; the padding must be zeros).
same_image() {
  local size
  size=$(stat -c %s "$1")
  cmp -n "$size" "$1" "$2" || return 1
  if [ "$(stat -c %s "$2")" -gt "$size" ]; then
    tail -c +$((size + 1)) "$2" | cmp -s - <(head -c $(($(stat -c %s "$2") - size)) /dev/zero) || return 1
  fi
  return 0
}

# json_field FILE NAME: a number from sluice's --stats JSON.
json_field() {
  $PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"
}
