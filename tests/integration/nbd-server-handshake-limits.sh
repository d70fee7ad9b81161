#!/bin/bash
# Clients that connect and never finish the handshake (not even STARTTLS) cannot lock
# out those that do: connections in the handshake are counted apart from the ones
# served (--max-handshakes, default 64, against --max-connections, default 16), and
# are dropped after a short --handshake-timeout (default 10 s). Beyond
# --max-handshakes a client is refused at once, all of them at the same time (refusals
# used to wait a quarter second each, one after another), with an NBD error naming
# the limit; the log says so in a line or two with a count, not one line per client.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdinfo python3

SIZE=16M
head -c "$SIZE" /dev/urandom >"$WORK/disk.img"
cp "$WORK/disk.img" "$WORK/disk.orig"

# idle PORT COUNT READY SECONDS: COUNT connections that never answer the greeting;
# READY appears once all are connected. They stay open until the server drops them
# (or SECONDS pass); then it prints how long after connecting the first one went
# ("held" if none did).
cat >"$WORK/idle.py" <<'PY'
import select, socket, sys, time
port, count, ready, seconds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
start = time.monotonic()
open(ready, "w").close()
first = None
while idle and time.monotonic() - start < seconds:
    readable, _, _ = select.select(idle, [], [], 0.2)
    for s in readable:
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        if not data:
            if first is None:
                first = time.monotonic() - start
            idle.remove(s)
print("dropped after %.1f s" % first if first is not None else "held", flush=True)
PY

wait_ready() {
  local i
  for i in $(seq 1 200); do [ -e "$1" ] && return 0; sleep 0.05; done
  die "the idle connections did not connect"
}

# --- the defaults: 24 idle connections, more than --max-connections' 16 ------------
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img"
python3 "$WORK/idle.py" "$PORT" 24 "$WORK/idle1.ready" 20 >"$WORK/idle1.out" &
IDLE=$!
PIDS+=("$IDLE")
wait_ready "$WORK/idle1.ready"
sleep 0.5  # the server has accepted them
start=$(date +%s%N)
timeout 20 nbdcopy "nbd://127.0.0.1:$PORT/disk" "$WORK/copy.img" 2>"$WORK/nbdcopy.err" ||
  die "nbdcopy was not served beside 24 idle connections: $(cat "$WORK/nbdcopy.err")"
took=$(( ($(date +%s%N) - start) / 1000000 ))
cmp "$WORK/copy.img" "$WORK/disk.orig" || die "nbdcopy read the wrong data"
[ "$took" -lt 10000 ] || die "nbdcopy beside idle connections took $took ms"
pass "24 idle connections at the defaults: nbdcopy served at once ($took ms), data verified"

# The default --handshake-timeout (10 s) drops them, and nothing did before.
wait "$IDLE" || true
dropped=$(cat "$WORK/idle1.out")
[[ $dropped =~ ^dropped\ after\ ([0-9]+)\.[0-9]\ s$ ]] || die "idle connections: $dropped"
[ "${BASH_REMATCH[1]}" -ge 8 ] && [ "${BASH_REMATCH[1]}" -lt 15 ] ||
  die "idle connections were $dropped, expected after the default 10 s"
pass "the idle connections were $dropped (default --handshake-timeout 10 s)"
stop_server

# --- beyond --max-handshakes: refused at once, concurrently, in NBD's words ---------
: >"$WORK/server.log"
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" --max-handshakes 20 --handshake-timeout 60
python3 "$WORK/idle.py" "$PORT" 20 "$WORK/idle2.ready" 60 >"$WORK/idle2.out" &
PIDS+=($!)
wait_ready "$WORK/idle2.ready"
sleep 0.5
# Forty clients at once, each as libnbd starts (STRUCTURED_REPLY, then GO): each must
# read the refusal, an ERR_POLICY naming the limit, and all within 2 s.
python3 - "$PORT" <<'PY' || die "forty refusals"
import socket, struct, sys, time
import rawnbd
port = int(sys.argv[1])
start = time.monotonic()
clients = [rawnbd.connect(("127.0.0.1", port)) for _ in range(40)]
for s in clients:
    rawnbd.greet(s)
    rawnbd.option(s, 8)  # STRUCTURED_REPLY
for s in clients:
    _, rtype, text = rawnbd.option_reply(s)
    assert rtype == 0x80000002, "STRUCTURED_REPLY of a refused client: reply 0x%x" % rtype
    try:
        rawnbd.choose(s, "disk")
        raise AssertionError("a client beyond --max-handshakes was served")
    except rawnbd.Refused as e:
        assert "(--max-handshakes)" in str(e), "the refusal does not name the limit: %s" % e
        reason = str(e)
    rawnbd.option(s, 2)  # ABORT
    assert rawnbd.option_reply(s)[1] == 1, "ABORT not acknowledged"
took = time.monotonic() - start
assert took < 2, "forty refusals took %.1f s" % took
print("ok: forty refused in %.2f s: %s" % (took, reason))
PY
pass "forty clients beyond --max-handshakes 20 refused concurrently with ERR_POLICY naming it"

# What a real client shows: nbdinfo fails; qemu-img prints the server's reason.
if nbdinfo "nbd://127.0.0.1:$PORT/disk" >/dev/null 2>"$WORK/nbdinfo.err"; then die "nbdinfo was served"; fi
grep -q "opt_go" "$WORK/nbdinfo.err" || die "nbdinfo's error: $(cat "$WORK/nbdinfo.err")"
refusals=42
if command -v qemu-img >/dev/null; then
  if timeout 10 qemu-img info "nbd://127.0.0.1:$PORT/disk" >/dev/null 2>"$WORK/qemu.err"; then die "qemu-img was served"; fi
  grep -q "the server is busy: 20 clients are already in their handshake (--max-handshakes); try again later" \
    "$WORK/qemu.err" || die "qemu-img did not show the reason: $(cat "$WORK/qemu.err")"
  pass "qemu-img shows the reason: $(tr '\n' ' ' <"$WORK/qemu.err")"
else
  refusals=41
  echo "qemu-img is not installed: its view of the refusal is not checked"
fi
stop_server  # reports what the limiter still holds back

# The log: a refusal in full, then the rest counted, however many lines that takes
# (an interval is 10 s); every refusal accounted for.
full=$(grep -c "^sluice: refused a connection from" "$WORK/server.log" || true)
counted=$(grep -o "^sluice: [0-9]* more connections refused" "$WORK/server.log" | awk '{s += $2} END {print s + 0}')
[ "$full" -ge 1 ] && [ "$full" -le 3 ] || die "$full refusals logged in full, expected 1 to 3"
[ $((full + counted)) -eq "$refusals" ] ||
  die "the log accounts for $full + $counted refusals, expected $refusals"
grep -q "more connections refused in the last 10 s; the last: refused a connection from .*(--max-handshakes)" \
  "$WORK/server.log" || die "no summary line"
pass "the log: $full line(s) in full and a count for the other $counted: $(grep -m1 'more connections refused' "$WORK/server.log")"
