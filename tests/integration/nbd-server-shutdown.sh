#!/bin/bash
# SIGTERM: the server stops accepting, finishes the requests in flight, flushes and
# exits 0, during a copy and with idle clients connected. What it acknowledged is in
# the file: every block is either what the client wrote or untouched. SIGINT does the
# same. With writes in flight at the signal none that was acknowledged is lost, and a
# request arriving after it gets ESHUTDOWN (or, on an idle connection, the close).
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdkit python3

# exits_cleanly WHEN: the server is gone within 10 s (never waited on for longer: that
# would hang the test), with status 0.
exits_cleanly() {
  local i status=0
  for i in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && die "the server did not exit within 10 s $1"
  wait "$SERVER_PID" || status=$?
  [ "$status" -eq 0 ] || die "exit status $status $1"
}

SIZE=128M
truncate -s "$SIZE" "$WORK/disk.img"
SOCK="$WORK/nbd.sock"
start_server "unix://$SOCK" --export disk="$WORK/disk.img"
U="nbd+unix:///disk?socket=$SOCK"

# The source (nbdkit's pattern plugin: every 8-byte word is its own offset) is rate
# limited so that the copy is still running when the signal comes.
nbdkit -U - --filter=rate pattern "$SIZE" rate=40M --run "nbdcopy --connections=2 \"\$uri\" '$U'" \
  >"$WORK/copy.log" 2>&1 &
COPY_PID=$!
PIDS+=("$COPY_PID")
sleep 1.5
kill -0 "$COPY_PID" || die "the copy finished before the signal; the test proves nothing"
started=$(date +%s.%N)
stop_server
took=$(python3 -c "print(round($(date +%s.%N) - $started, 1))")
copy_status=0
wait "$COPY_PID" || copy_status=$?
[ "$copy_status" -ne 0 ] || die "the copy reported success although the server went away mid-copy"
grep -q 'no export chosen\|internal error' "$WORK/server.log" && die "unexpected server messages"
pass "SIGTERM mid-copy: the server exited 0 after ${took} s; the client saw the copy fail"

python3 - "$WORK/disk.img" <<'PY' || die "the file holds something the client never wrote"
import struct, sys
block = 4096
written = untouched = 0
zero = bytes(block)
with open(sys.argv[1], 'rb') as f:
    offset = 0
    while True:
        data = f.read(block)
        if not data:
            break
        if data == zero:
            untouched += 1
        else:
            expected = struct.pack('>%dQ' % (block // 8), *range(offset, offset + block, 8))
            assert data == expected, 'block at %d is neither the pattern nor untouched' % offset
            written += 1
        offset += block
assert written > 0, 'nothing was written before the signal'
assert untouched > 0, 'everything was written: the signal came too late'
print('ok: %d blocks written as sent, %d untouched, none torn' % (written, untouched))
PY

# Idle clients (one negotiating, one in transmission) do not hold the server up.
start_server "unix://$SOCK" --export disk="$WORK/disk.img"
python3 - "$SOCK" "$SERVER_PID" <<'PY' || die "shutdown with idle clients"
import os, signal, sys, time, rawnbd
idle = rawnbd.connect(sys.argv[1])
rawnbd.go(idle, "disk")
rawnbd.request(idle, 1, 0, 4096, cookie=3)
idle.sendall(b"q" * 4096)
assert rawnbd.simple_reply(idle) == (0, 3)
negotiating = rawnbd.connect(sys.argv[1])
rawnbd.recv_exactly(negotiating, 18)
os.kill(int(sys.argv[2]), signal.SIGTERM)
assert rawnbd.closed(idle), "the idle connection was not closed"
assert rawnbd.closed(negotiating), "the negotiating connection was not closed"
print("ok: idle and negotiating connections closed at SIGTERM")
PY
exits_cleanly "with idle clients"
[ "$(head -c 4096 "$WORK/disk.img")" = "$(printf 'q%.0s' $(seq 4096))" ] || die "the acknowledged write is not in the file"
pass "idle clients: exit 0, the acknowledged write is in the file"

# No acknowledged write is lost to a stop signal that lands with writes in flight. A
# raw client keeps a window of 256 KiB FUA writes open (each block's words hold its own
# index, so a block tells whose data it is), is signalled once 64 are acknowledged,
# and keeps sending for a while after. Every reply must be success or ESHUTDOWN; after
# exit 0, every success is in the file, every ESHUTDOWN left its range untouched, and
# an unanswered write is either whole or absent.
cat >"$WORK/inflight.py" <<'PY'
import os, signal, struct, sys, threading, rawnbd
path, pid, signame, image = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
BLOCK, COUNT, WINDOW = 256 * 1024, 512, 32
BEFORE, AFTER = 64, 64   # acknowledged before the signal (at least); sent after it (at most)
ESHUTDOWN = 108
# FUA makes each write wait for the disk: the server, not this client, is then the
# slower side, and the window fills with writes the server is still working on.
FUA = 1

def content(i):
    return struct.pack(">Q", i + 1) * (BLOCK // 8)

s = rawnbd.connect_go(path, "disk")
cond = threading.Condition()
state = {"signalled": False, "outstanding": 0, "sent_after": 0, "closed": False}
sent = {}      # cookie -> sent after the signal
whole = set()  # cookies whose request left in full
replies = {}   # cookie -> (error, received after the signal)

def writer():
    for i in range(COUNT):
        with cond:
            cond.wait_for(lambda: state["outstanding"] < WINDOW or state["closed"])
            if state["closed"] or state["sent_after"] >= AFTER:
                return
            state["outstanding"] += 1
            sent[i] = state["signalled"]
            if state["signalled"]:
                state["sent_after"] += 1
        try:
            s.sendall(struct.pack(">IHHQQI", rawnbd.REQUEST_MAGIC, FUA, 1, i, i * BLOCK, BLOCK) + content(i))
        except OSError:
            return  # the server stopped reading: this write was cut short
        whole.add(i)

t = threading.Thread(target=writer, daemon=True)
t.start()
in_flight_at_signal = None
while True:
    try:
        error, cookie = rawnbd.simple_reply(s)
    except (EOFError, ConnectionResetError, TimeoutError):
        break
    with cond:
        assert cookie in sent and cookie not in replies, "a reply for cookie %d, never sent or answered twice" % cookie
        replies[cookie] = (error, state["signalled"])
        state["outstanding"] -= 1
        acked = sum(1 for e, _ in replies.values() if e == 0)
        # Signalled with the window at least half full: the server then has writes
        # in hand, not just one still arriving.
        if in_flight_at_signal is None and acked >= BEFORE and state["outstanding"] >= WINDOW // 2:
            in_flight_at_signal = state["outstanding"]
            os.kill(pid, getattr(signal, signame))
            state["signalled"] = True
        cond.notify_all()
with cond:
    state["closed"] = True
    cond.notify_all()
t.join()
assert in_flight_at_signal is not None, "the window never filled: the signal was not sent (%d replies)" % len(replies)
acked_after = sorted(c for c, (e, after) in replies.items() if e == 0 and after)
refused = sorted(c for c, (e, _) in replies.items() if e == ESHUTDOWN)
unanswered = sorted(set(sent) - set(replies))
print("  %s: %d in flight at the signal; %d acknowledged before, %d after; %d ESHUTDOWN; "
      "%d sent after the signal; %d unanswered" % (signame, in_flight_at_signal, len(replies) - len(acked_after)
      - len(refused), len(acked_after), len(refused), sum(sent.values()), len(unanswered)))
bad = {c: e for c, (e, _) in replies.items() if e not in (0, ESHUTDOWN)}
assert not bad, "replies other than success and ESHUTDOWN: %s" % bad
assert acked_after, "no write in flight at the signal was finished and acknowledged"
assert all(replies[c][1] for c in refused), "ESHUTDOWN before the signal"
# The server reads what was sent before it stopped reading: only a write cut short
# may go unanswered.
assert not whole & set(unanswered), "writes sent in full got no reply: %s" % sorted(whole & set(unanswered))
with open(image + ".result", "w") as f:
    for c, (e, _) in sorted(replies.items()):
        f.write("%d %s\n" % (c, "acked" if e == 0 else "refused"))
    for c in unanswered:
        f.write("%d unanswered\n" % c)
PY
cat >"$WORK/check_inflight.py" <<'PY'
import struct, sys
image = sys.argv[1]
BLOCK = 256 * 1024
with open(image, "rb") as f:
    for line in open(image + ".result"):
        cookie, fate = line.split()
        cookie = int(cookie)
        f.seek(cookie * BLOCK)
        data = f.read(BLOCK)
        mine, untouched = struct.pack(">Q", cookie + 1) * (BLOCK // 8), bytes(BLOCK)
        if fate == "acked":
            assert data == mine, "write %d was acknowledged but is not in the file" % cookie
        elif fate == "refused":
            assert data == untouched, "write %d was refused with ESHUTDOWN but is in the file" % cookie
        else:
            assert data in (mine, untouched), "unanswered write %d is torn" % cookie
PY

# acked_writes_survive SIGNAL: the case above, stopped by SIGNAL.
acked_writes_survive() {
  local sig=$1
  rm -f "$WORK/inflight.img"
  truncate -s 128M "$WORK/inflight.img"
  start_server "unix://$SOCK" --export disk="$WORK/inflight.img"
  python3 "$WORK/inflight.py" "$SOCK" "$SERVER_PID" "$sig" "$WORK/inflight.img" ||
    die "$sig with writes in flight"
  exits_cleanly "after $sig with writes in flight"
  [ -e "$SOCK" ] && die "the socket file was left behind after $sig"
  python3 "$WORK/check_inflight.py" "$WORK/inflight.img" || die "$sig: the file does not hold what was acknowledged"
  pass "$sig with writes in flight: exit 0; every acknowledged write is in the file, no refused one is"
}
acked_writes_survive SIGTERM
# SIGINT (Ctrl-C at a terminal) stops the server exactly as SIGTERM does.
acked_writes_survive SIGINT

# file_holds FILE OFFSET PYTHON-BYTES: the file holds those bytes at that offset.
file_holds() {
  python3 -c '
import sys
expected = eval(sys.argv[3])
with open(sys.argv[1], "rb") as f:
    f.seek(int(sys.argv[2]))
    sys.exit(f.read(len(expected)) != expected)
' "$@"
}

# After the signal: a connection with a request still running (a 32 MiB READ whose
# reply the client has not read yet) stays open, and new requests on it get ESHUTDOWN
# (the spec's soft disconnect) and change nothing; an idle connection is closed at
# once, so a request sent on it gets no reply at all.
python3 - "$WORK/late.img" <<'PY'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack(">%dQ" % (4 << 20), *range(0, 32 << 20, 8)))  # each word its offset
    f.truncate(64 << 20)
PY
start_server "unix://$SOCK" --export disk="$WORK/late.img"
python3 - "$SOCK" "$SERVER_PID" <<'PY' || die "requests after the signal"
import os, signal, struct, sys, time, rawnbd
path, pid = sys.argv[1], int(sys.argv[2])
M, ESHUTDOWN = 1 << 20, 108
busy = rawnbd.connect_go(path, "disk")
idle = rawnbd.connect_go(path, "disk")
rawnbd.request(busy, 0, 0, 32 * M, cookie=1)  # READ: the server waits for room to send
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
rawnbd.request(busy, 1, 40 * M, 4096, cookie=2)  # WRITE
busy.sendall(b"w" * 4096)
rawnbd.request(busy, 0, 0, 4096, cookie=3)  # READ
rawnbd.request(busy, 3, 0, 0, cookie=4)  # FLUSH
got = {}
while True:
    try:
        error, cookie = rawnbd.simple_reply(busy)
    except EOFError:
        break
    assert cookie not in got, "two replies for cookie %d" % cookie
    got[cookie] = error
    if cookie == 1 and error == 0:
        # Read at full speed: the server cuts off a client still owing it reads 2 s
        # after the signal, and rawnbd.recv_exactly is quadratic in the length.
        data = bytearray(32 * M)
        view, at = memoryview(data), 0
        while at < len(data):
            n = busy.recv_into(view[at:])
            assert n > 0, "closed after %d bytes of the READ in flight" % at
            at += n
        assert data == struct.pack(">%dQ" % (4 * M), *range(0, 32 * M, 8)), "the READ in flight returned wrong data"
assert got == {1: 0, 2: ESHUTDOWN, 3: ESHUTDOWN, 4: ESHUTDOWN}, \
    "replies on the busy connection: %s (expected the READ to succeed, the rest ESHUTDOWN)" % got
print("  busy connection: the READ in flight finished; WRITE, READ and FLUSH after the signal got ESHUTDOWN")
try:
    rawnbd.request(idle, 1, 44 * M, 4096, cookie=5)
    idle.sendall(b"i" * 4096)
except OSError:
    pass  # already closed for writing: as good as no reply
rest = b""
try:
    while True:
        chunk = idle.recv(65536)
        if not chunk:
            break
        rest += chunk
except ConnectionResetError:
    pass
assert rest == b"", "the idle connection answered a request sent after the signal: %r" % rest[:32]
print("  idle connection: closed, a WRITE sent after the signal got no reply")
PY
exits_cleanly "after requests that came after the signal"
file_holds "$WORK/late.img" $((40 << 20)) 'bytes(8 << 20)' || die "a write sent after the signal is in the file"
pass "after SIGTERM: ESHUTDOWN on a busy connection, close on an idle one; neither late write landed; exit 0"

# A WRITE whose header came before the signal but whose payload was still arriving is
# in flight: the server reads the rest, writes it, acknowledges it, then closes.
truncate -s 16M "$WORK/half.img"
start_server "unix://$SOCK" --export disk="$WORK/half.img"
python3 - "$SOCK" "$SERVER_PID" <<'PY' || die "a WRITE half sent at the signal"
import os, signal, sys, time, rawnbd
s = rawnbd.connect_go(sys.argv[1], "disk")
rawnbd.request(s, 1, 1 << 20, 65536, cookie=7)  # WRITE
s.sendall(b"h" * 32768)
time.sleep(0.3)  # the header and half the payload are in
os.kill(int(sys.argv[2]), signal.SIGTERM)
time.sleep(0.3)
s.sendall(b"h" * 32768)
assert rawnbd.simple_reply(s) == (0, 7), "the half-sent WRITE was not acknowledged"
assert rawnbd.closed(s), "the connection stayed open after its last request"
print("  a WRITE half sent at the signal: finished and acknowledged, then the close")
PY
exits_cleanly "after a WRITE half sent at the signal"
file_holds "$WORK/half.img" $((1 << 20)) 'b"h" * 65536' || die "the acknowledged half-sent write was lost"
pass "SIGTERM while a WRITE's payload arrives: the WRITE is finished, acknowledged and in the file; exit 0"

# A client that stalls mid-WRITE (the header and half the payload came before the
# signal, then nothing) is cut off when the grace period (2 s) runs out; the server
# then exits 0 (everything it acknowledged is flushed), and its log names the
# connection it cut and what that connection had outstanding.
truncate -s 16M "$WORK/stall.img"
: >"$WORK/server.log"
start_server "unix://$SOCK" --export disk="$WORK/stall.img"
python3 - "$SOCK" "$SERVER_PID" >"$WORK/stall.out" <<'PY' || die "a client stalled mid-WRITE at the signal"
import os, signal, sys, time, rawnbd
s = rawnbd.connect_go(sys.argv[1], "disk")
rawnbd.request(s, 1, 1 << 20, 65536, cookie=9)  # WRITE
s.sendall(b"s" * 32768)
time.sleep(0.3)  # the header and half the payload are in; the rest never comes
os.kill(int(sys.argv[2]), signal.SIGTERM)
signalled = time.monotonic()
assert rawnbd.closed(s), "the stalled connection was not closed"
took = time.monotonic() - signalled
assert took >= 1.5, "cut off %.1f s after the signal, before the 2 s grace period ran out" % took
print(os.getpid(), round(took, 1))
PY
read -r client_pid took <"$WORK/stall.out"
exits_cleanly "after cutting off a client stalled mid-WRITE"
grep "cut off" "$WORK/server.log" | grep "pid $client_pid," | grep "export 'disk'" |
  grep -q "1 request outstanding: WRITE of 65536 bytes at offset 1048576 (its payload still arriving)" ||
  die "the log does not name the connection cut off (pid $client_pid) and its outstanding WRITE"
file_holds "$WORK/stall.img" $((1 << 20)) 'bytes(65536)' || die "the half-sent WRITE that was cut off is in the file"
pass "a client stalled mid-WRITE: cut off ${took} s after SIGTERM, named in the log with its WRITE; exit 0"
echo "all passed"
