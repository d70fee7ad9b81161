# Shared by the nbd-server-*.sh tests: a scratch directory, a server started and
# stopped by its pid, and a raw NBD client in Python for what libnbd will not send.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/listening.sh"

: "${SLUICE:?SLUICE must point at the sluice binary}"
# nbdsh is Python: the first python3 on PATH may lack the nbd module.
export PATH="/usr/bin:$PATH"

WORK=$(mktemp -d "${SLUICE_TEST_DIR:-/var/tmp}/sluice-nbd.XXXXXX")
PIDS=()
MOUNTS=()

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  local m
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

requires() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
  done
}

die() {
  echo "FAIL: $*" >&2
  if [ -f "$WORK/server.log" ]; then echo "--- server log" >&2; cat "$WORK/server.log" >&2; fi
  exit 1
}

pass() { echo "ok: $*"; }

free_port() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/free_port.py"
}

# start_server LISTEN_URI ARGS...: runs `sluice serve --protocol nbd`, sets SERVER_PID,
# returns once the server accepts connections.
start_server() {
  local listen=$1
  shift
  # A socket file left by an earlier server would look like this one listening.
  case $listen in unix://*) rm -f "${listen#unix://}" ;; esac
  "$SLUICE" serve --protocol nbd --listen "$listen" "$@" >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_listening "$listen" "$SERVER_PID" || die "the server is not listening on $listen"
}

# stop_server: SIGTERM, then the exit status must be 0 within 10 s.
stop_server() {
  kill -TERM "$SERVER_PID"
  local i
  for i in $(seq 1 100); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      local status=0
      wait "$SERVER_PID" || status=$?
      [ "$status" -eq 0 ] || die "the server exited with status $status after SIGTERM"
      return 0
    fi
    sleep 0.1
  done
  die "the server did not exit within 10 s of SIGTERM"
}

# A raw NBD client (Python module on stdin's path) for malformed traffic.
cat >"$WORK/rawnbd.py" <<'PY'
import socket, struct

OPT_MAGIC = 0x49484156454F5054
REPLY_MAGIC = 0x3e889045565a9
REQUEST_MAGIC = 0x25609513

def connect(address):
    if isinstance(address, str):
        s = socket.socket(socket.AF_UNIX)
    else:
        s = socket.socket()
    s.settimeout(10)
    s.connect(address)
    return s

def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data

def greet(s):
    magic, opt, flags = struct.unpack(">QQH", recv_exactly(s, 18))
    assert magic == 0x4e42444d41474943 and opt == OPT_MAGIC, "bad greeting"
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES

def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", OPT_MAGIC, opt, len(data)) + data)

def option_reply(s):
    magic, opt, rtype, length = struct.unpack(">QIII", recv_exactly(s, 20))
    assert magic == REPLY_MAGIC, "bad option reply magic"
    return opt, rtype, recv_exactly(s, length)

class Refused(Exception):
    """GO answered with ERR_POLICY: the server is full (the reason is the message)."""

def choose(s, name):
    """NBD_OPT_GO for the export `name`, on a greeted connection."""
    n = name.encode()
    option(s, 7, struct.pack(">I", len(n)) + n + struct.pack(">H", 0))
    while True:
        _, rtype, text = option_reply(s)
        if rtype == 1:
            return
        if rtype == 0x80000002:
            raise Refused(text.decode())
        assert rtype == 3, "GO failed with reply type 0x%x" % rtype

def go(s, name):
    greet(s)
    choose(s, name)

def connect_greeted(address, tries=100):
    """A connection past the greeting. With --max-handshakes the server frees a slot a
    moment after a client closes (later still under the sanitizers), and refuses a
    connection until then: retry for up to tries x 0.1 s."""
    import time
    for attempt in range(tries):
        s = connect(address)
        try:
            greet(s)
            return s
        except (EOFError, ConnectionResetError):
            s.close()
            if attempt == tries - 1:
                raise
            time.sleep(0.1)

def connect_go(address, name, tries=100):
    """A connection in transmission. A full server refuses GO until a closed client's
    slot comes back (see connect_greeted): retry for up to tries x 0.1 s."""
    import time
    for attempt in range(tries):
        s = connect_greeted(address, tries)
        try:
            choose(s, name)
            return s
        except Refused:
            s.close()
            if attempt == tries - 1:
                raise
            time.sleep(0.1)

def request(s, command, offset, length, cookie=1, flags=0, magic=REQUEST_MAGIC):
    s.sendall(struct.pack(">IHHQQI", magic, flags, command, cookie, offset, length))

def simple_reply(s):
    magic, error, cookie = struct.unpack(">IIQ", recv_exactly(s, 16))
    assert magic == 0x67446698, "not a simple reply: 0x%x" % magic
    return error, cookie

def closed(s):
    """True once the server closed the connection (EOF or reset), within the timeout."""
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
PY
export PYTHONPATH="$WORK${PYTHONPATH:+:$PYTHONPATH}"
