#!/bin/bash
# SIGTERM: the server stops accepting, finishes the requests in flight, flushes and
# exits 0, during a copy and with idle clients connected. What it acknowledged is in
# the file: every block is either what the client wrote or untouched.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdkit python3

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
for i in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
status=0
wait "$SERVER_PID" || status=$?
[ "$status" -eq 0 ] || die "exit status $status with idle clients"
[ "$(head -c 4096 "$WORK/disk.img")" = "$(printf 'q%.0s' $(seq 4096))" ] || die "the acknowledged write is not in the file"
pass "idle clients: exit 0, the acknowledged write is in the file"
echo "all passed"
