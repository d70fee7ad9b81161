#!/bin/bash
# A second SIGTERM that lands while an idle `sluice serve` is already finishing after
# the first must not keep it alive. It once did: the late signal's completion waited for
# another signal after the wait had been cancelled, so the process sat in its event
# loop for ever with nothing left to serve. The window is a few hundred microseconds,
# so each protocol is stopped many times, the second signal sent 0 to 300 us after the
# first. The old code failed it in each of three runs, but timing cannot promise that;
# stop_signals_test.cpp is the deterministic check of the same rule.
source "$(dirname "$0")/nbd_server_lib.sh"
requires python3

ROUNDS=${ROUNDS:-25}
SOCK="$WORK/serve.sock"

# two_signals PID DELAY_US: SIGTERM, then another DELAY_US microseconds later.
two_signals() {
  python3 - "$1" "$2" <<'PY'
import os, signal, sys, time
pid, delay = int(sys.argv[1]), int(sys.argv[2]) / 1e6
os.kill(pid, signal.SIGTERM)
until = time.perf_counter() + delay
while time.perf_counter() < until:
    pass  # a busy wait: sleeping would overshoot
try:
    os.kill(pid, signal.SIGTERM)
except ProcessLookupError:
    pass  # it had already exited
PY
}

# rounds PROTOCOL SERVE-OPTIONS...: start, signal twice, expect exit 0 within 10 s.
rounds() {
  local protocol=$1 round i status
  shift
  for round in $(seq 1 "$ROUNDS"); do
    rm -f "$SOCK"
    "$SLUICE" serve --protocol "$protocol" --listen "unix://$SOCK" "$@" >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_listening "unix://$SOCK" "$SERVER_PID" || die "the server is not listening"
    two_signals "$SERVER_PID" $(((round % 16) * 20))
    for i in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      kill -KILL "$SERVER_PID"  # it takes no more signals; cleanup would wait for ever
      die "$protocol: round $round: still running 10 s after two SIGTERMs"
    fi
    status=0
    wait "$SERVER_PID" || status=$?
    [ "$status" -eq 0 ] || die "$protocol: round $round: exit status $status after two SIGTERMs while idle"
    [ -e "$SOCK" ] && die "$protocol: round $round: the socket file was left behind"
  done
  pass "$protocol: $ROUNDS idle servers each exited 0 after two SIGTERMs 0-300 us apart"
}

truncate -s 1M "$WORK/disk.img"
rounds nbd --export disk="$WORK/disk.img"
rounds chunked --output null: --size 1M
rounds raw --output "$WORK/disk.img"
echo "all passed"
