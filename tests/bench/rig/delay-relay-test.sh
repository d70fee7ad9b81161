#!/bin/bash
# The benchmark's delay relay on its own, on loopback (no root, no namespaces):
#  - a 20 ms relay: every round trip takes at least 20 ms (and not wildly more), each
#    direction at least 10 ms, and 16 MiB of random bytes come back whole and in order,
#    end of stream included;
#  - the end of a stream is delayed like its bytes: a FIN arrives as an EOF, a reset as
#    a reset, each at least 10 ms after the sender sent it;
#  - a 0 ms relay passes 16 MiB through unchanged;
#  - the summary the harness parses names the emulation and counts the bytes.
SOURCE_ROOT=${SOURCE_ROOT:-$(cd "$(dirname "$0")/../../.." && pwd)}
. "$SOURCE_ROOT/tests/integration/functions.sh"

RELAY=${DELAY_RELAY:-$BUILD_ROOT/tests/bench/sluice-delay-relay}
PROBE=$SOURCE_ROOT/tests/bench/rig/relay_probe.py
[[ -x $RELAY ]] || fail "no relay binary at $RELAY"
requires "$PYTHON"

# wait_for_file FILE: the ready file a relay or probe writes once it listens.
wait_for_file() {
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s $1 ]] && return 0
    sleep 0.05
  done
  fail "nothing wrote $1 within 5 s"
}

# start_relay NAME RTT TARGET-PORT: a relay on a free loopback port, into ${NAME}_port/_pid.
start_relay() {
  local name=$1 rtt=$2 target=$3 port pid
  "$RELAY" --listen 127.0.0.1:0 --connect "127.0.0.1:$target" --rtt "$rtt" --quiet \
    --ready-file "$scratch/$name.ready" >"$scratch/$name.out" 2>"$scratch/$name.err" &
  on_exit "kill $! 2>/dev/null"
  wait_for_file "$scratch/$name.ready"
  read -r port pid <"$scratch/$name.ready"
  printf -v "${name}_port" %s "$port"
  printf -v "${name}_pid" %s "$pid"
}

# stop_relay NAME: SIGTERM, wait, leave its JSON summary in $scratch/NAME.out.
stop_relay() {
  local pid_var=${1}_pid
  kill -TERM "${!pid_var}"
  wait "${!pid_var}" || fail "relay $1 exited with status $?: $(cat "$scratch/$1.err")"
}

json() { "$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# at_least A B: A >= B, as decimals.
at_least() { "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2"; }

"$PYTHON" "$PROBE" echo --listen 127.0.0.1:0 --ready-file "$scratch/echo.ready" 2>"$scratch/echo.err" &
on_exit "kill $! 2>/dev/null"
wait_for_file "$scratch/echo.ready"
read -r echo_port _ <"$scratch/echo.ready"

# --- 20 ms: the delay --------------------------------------------------------------

start_relay slow 20 "$echo_port"
grep -q 'RTT at the application level' "$scratch/slow.err" ||
  fail "the relay does not say it emulates RTT at the application level: $(cat "$scratch/slow.err")"

pings=$("$PYTHON" "$PROBE" ping --connect "127.0.0.1:$slow_port" --count 10)
log "20 ms relay, 10 round trips: $pings"
at_least "$(json "$pings" min_ms)" 20 || fail "a round trip through a 20 ms relay took less than 20 ms: $pings"
# 100: a loaded sanitizer run has measured a 67 ms maximum (median 23).
at_least 100 "$(json "$pings" median_ms)" || fail "round trips through a 20 ms relay take far more than 20 ms: $pings"

bulk=$("$PYTHON" "$PROBE" bulk --connect "127.0.0.1:$slow_port" --bytes $((16 << 20))) ||
  fail "16 MiB echoed through the 20 ms relay came back different: $bulk"
log "20 ms relay, 16 MiB echoed: $bulk"
at_least "$(json "$bulk" seconds)" 0.020 || fail "16 MiB echoed through a 20 ms relay in under 20 ms: $bulk"

# One direction alone: a sink behind a second relay, stamped with CLOCK_MONOTONIC.
"$PYTHON" "$PROBE" sink --listen 127.0.0.1:0 --ready-file "$scratch/sink.ready" >"$scratch/sink.out" &
sink_pid=$!
on_exit "kill $sink_pid 2>/dev/null"
wait_for_file "$scratch/sink.ready"
read -r sink_port _ <"$scratch/sink.ready"
start_relay oneway 20 "$sink_port"
"$PYTHON" "$PROBE" stamp --connect "127.0.0.1:$oneway_port" --count 10 --gap-ms 3
wait "$sink_pid" || fail "the sink got no timestamps through the relay"
oneway=$(cat "$scratch/sink.out")
log "20 ms relay, one way: $oneway"
[[ $(json "$oneway" count) == 10 ]] || fail "10 timestamps sent, $(json "$oneway" count) arrived: $oneway"
at_least "$(json "$oneway" min_ms)" 10 || fail "one direction of a 20 ms relay took less than 10 ms: $oneway"
# The sender closes 3 ms after its last stamp: the FIN is due 10 ms after that.
[[ $(json "$oneway" end) == eof ]] || fail "a FIN through the relay did not arrive as an EOF: $oneway"
at_least "$(json "$oneway" end_after_last_ms)" 13 || fail "a FIN passed the relay in under 10 ms: $oneway"
stop_relay oneway

# The same ending in a reset: the stamps arrive, then a reset (not an EOF), 10 ms late.
"$PYTHON" "$PROBE" sink --listen 127.0.0.1:0 --ready-file "$scratch/sink2.ready" >"$scratch/sink2.out" &
sink_pid=$!
on_exit "kill $sink_pid 2>/dev/null"
wait_for_file "$scratch/sink2.ready"
read -r sink_port _ <"$scratch/sink2.ready"
start_relay aborted 20 "$sink_port"
"$PYTHON" "$PROBE" stamp --connect "127.0.0.1:$aborted_port" --count 10 --gap-ms 3 --end reset
wait "$sink_pid" || fail "the sink got no timestamps through the relay before the reset"
aborted=$(cat "$scratch/sink2.out")
log "20 ms relay, one way, ending in a reset: $aborted"
[[ $(json "$aborted" count) == 10 ]] || fail "10 timestamps sent before a reset, $(json "$aborted" count) arrived: $aborted"
[[ $(json "$aborted" end) == reset ]] || fail "a reset through the relay did not arrive as a reset: $aborted"
at_least "$(json "$aborted" end_after_last_ms)" 13 || fail "a reset passed the relay in under 10 ms: $aborted"
stop_relay aborted

stop_relay slow
summary=$(cat "$scratch/slow.out")
log "summary: $summary"
[[ $(json "$summary" relay) == "application-level RTT emulation" ]] || fail "summary does not name the emulation: $summary"
[[ $(json "$summary" connections) == 2 ]] || fail "summary counts $(json "$summary" connections) connections, not 2"
[[ $(json "$summary" failed) == 0 ]] || fail "a connection through the relay failed: $summary"
up=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["up"]["bytes"])' "$summary")
[[ $up == $((16 * 1048576 + 10 * 64)) ]] || fail "relay counts $up bytes up, sent $((16 * 1048576 + 10 * 64))"

# --- 0 ms: a plain pass-through --------------------------------------------------------

start_relay fast 0 "$echo_port"
bulk=$("$PYTHON" "$PROBE" bulk --connect "127.0.0.1:$fast_port" --bytes $((16 << 20))) ||
  fail "16 MiB echoed through the 0 ms relay came back different: $bulk"
log "0 ms relay, 16 MiB echoed: $bulk"
stop_relay fast

log "PASS"
