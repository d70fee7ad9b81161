#!/bin/bash
# A server far away: the client times its handshake's option round trips and sizes
# itself by the quickest. Near (loopback), the defaults: depth 8, two connections to a
# multi-conn server (unless a loaded machine measured its loopback slow). Through the benchmark rig's delay relay at 10 ms: one connection
# and enough requests in flight for two round trips at 10 Gbit/s (depth_for). An
# explicit --depth or --connections is kept at any distance. Every copy is read back
# and compared.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy
requires_nbdkit_plugin memory
RELAY=${DELAY_RELAY:-$BUILD_ROOT/tests/bench/sluice-delay-relay}
[[ -x $RELAY ]] || fail "no relay binary at $RELAY"

random_file "$scratch/random.img" 48M
nbdkit_tcp mem memory 64M
near_uri=$uri

# The depth the client must pick for a round trip of $1 microseconds with requests of
# $2 bytes: engine/copy_options.cpp's depth_for, restated.
expected_depth() {
  "$PYTHON" -c 'import math, sys
rt, request = int(sys.argv[1]) * 1e-6, int(sys.argv[2])
print(min(max(8, math.ceil(2 * rt * 1.25e9 / request)), max(8, (64 << 20) // request)))' "$1" "$2"
}

check_copy() {  # check_copy LABEL URI: the export holds the image
  read_export "$2" "$scratch/back.img"
  head -c "$(stat -c %s "$scratch/random.img")" "$scratch/back.img" >"$scratch/back-head.img"
  same_content "$scratch/random.img" "$scratch/back-head.img"
  rm -f "$scratch/back.img" "$scratch/back-head.img"
}

log "near: the measured default depth, two connections"
expect_copy "$scratch/random.img" "$near_uri"
rt=$(stat_field round_trip_us)
log "round trip ${rt} us, depth $(stat_field depth), $(stat_field connections) connection(s)"
((rt > 0)) || fail "no round trip was measured"
# The rules, whatever this machine's loopback measured (a loaded machine under ASan has
# measured 4 ms here, which asks for depth 10): the depth for that round trip, at least
# the default 8; two connections up to 0.5 ms, else one.
assert_eq "depth" "$(stat_field depth)" "$(expected_depth "$rt" "$(stat_field request_size)")"
(($(stat_field depth) >= 8)) || fail "the depth fell below the default 8"
if ((rt < 1000)); then assert_eq "depth" "$(stat_field depth)" 8; fi
assert_default_connections "$near_uri"
check_copy near "$near_uri"

"$RELAY" --listen 127.0.0.1:0 --connect "127.0.0.1:$port" --rtt 10 --quiet \
  --ready-file "$scratch/relay.ready" >"$scratch/relay.out" 2>"$scratch/relay.err" &
on_exit "kill $! 2>/dev/null"
wait_for_file "$scratch/relay.ready" || fail "the relay did not start: $(cat "$scratch/relay.err")"
read -r relay_port _ <"$scratch/relay.ready"
far_uri=nbd://127.0.0.1:$relay_port/

log "10 ms away: deeper, one connection"
nbdsh_zero() { PATH=/usr/bin:$PATH nbdsh -u "$near_uri" -c 'h.zero(h.get_size(), 0)'; }
nbdsh_zero || fail "could not clear the export"
expect_copy "$scratch/random.img" "$far_uri"
rt=$(stat_field round_trip_us)
log "round trip ${rt} us, depth $(stat_field depth), $(stat_field connections) connection(s)"
((rt >= 10000)) || fail "the round trip through a 10 ms relay was measured as $rt us"
((rt < 2000000)) || fail "the round trip through a 10 ms relay was measured as $rt us"
assert_eq "request size (buffered WRITEs)" "$(stat_field request_size)" $((1 << 20))
assert_eq "depth" "$(stat_field depth)" "$(expected_depth "$rt" "$(stat_field request_size)")"
(($(stat_field depth) > 8)) || fail "the depth did not grow for a 10 ms round trip"
assert_eq "connections" "$(stat_field connections)" 1
check_copy far "$near_uri"

log "10 ms away, --depth 4 --connections 2: both kept"
nbdsh_zero || fail "could not clear the export"
expect_copy --depth 4 --connections 2 "$scratch/random.img" "$far_uri"
assert_eq "depth" "$(stat_field depth)" 4
assert_eq "connections" "$(stat_field connections)" 2
check_copy "far, explicit" "$near_uri"

log "reading from 10 ms away: the source's round trip counts too"
expect_copy "$far_uri" "$scratch/read.img"
(($(stat_field round_trip_us) >= 10000)) || fail "the source's round trip was not measured"
(($(stat_field depth) > 8)) || fail "the depth did not grow for a far source"
head -c "$(stat -c %s "$scratch/random.img")" "$scratch/read.img" >"$scratch/read-head.img"
same_content "$scratch/random.img" "$scratch/read-head.img"
log "ok"
