#!/bin/bash
# --threads N: NBD connections spread over N event loops (this one included), with
# every byte verified, plain and over TLS, writing and reading, by default a loop per
# connection; the extra loop really runs (its thread is there during the
# copy); and failures on a connection that lives on another loop (a server error, a
# killed server) end the copy with a clear error, no crash and no hang. An image of more
# than one stripe (64 MiB) is written in lanes, one on each connection's loop, each
# writing through the connections on its own loop: data, zeros (WRITE_ZEROES, and
# explicit zero WRITEs where the server has none) and the same failures.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit
requires openssl
requires_nbdkit_plugin memory
requires_nbdkit_filter log
requires_nbdkit_filter delay
requires_nbdkit_filter error

cpus=$(nproc)
random_file "$scratch/random.img" 96M

log "plain, 4 connections on 2 loops: writes on every connection, data intact"
nbdkit_unix mem --filter=log memory 96M logfile="$scratch/mem.log"
expect_copy --connections 4 --threads 2 --lanes 2 --request-size 1M "$scratch/random.img" "$uri"
assert_eq "connections" "$(stat_field connections)" 4
assert_eq "loops" "$(stat_field loops)" 2
assert_eq "lanes, one on each loop" "$(stat_field lanes)" 2
writers=$(grep -o 'connection=[0-9]* Write ' "$scratch/mem.log" | sort -u | wc -l)
assert_eq "connections that wrote" "$writers" 4
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/random.img" "$scratch/readback.img"

log "lanes: never more than the connections have loops, and one lane when asked for"
writers() { grep -o 'connection=[0-9]* Write ' "$scratch/mem.log" | sort -u | wc -l; }
before=$(writers)
expect_copy --connections 4 --threads 2 --lanes 4 "$scratch/random.img" "$uri"
assert_eq "lanes on 2 loops" "$(stat_field lanes)" 2
expect_copy --connections 4 --threads 2 --lanes 1 "$scratch/random.img" "$uri"
assert_eq "one lane when asked" "$(stat_field lanes)" 1
assert_eq "connections that wrote, in lanes and in one" "$(($(writers) - before))" 8
read_export "$uri" "$scratch/readback-lanes.img"
same_content "$scratch/random.img" "$scratch/readback-lanes.img"

log "lanes with zeros: holes and zero blocks in both stripes, with and without WRITE_ZEROES"
# Old data under every zero range, so a zero that was not written shows.
sparse_image "$scratch/sparse.img" 160M 1M 3M 40M 2M 70M 5M 150M 1M
write_zeros "$scratch/sparse.img" 100M 4M
mem_uri=$uri
for filter in "" nozero; do
  nbdkit_unix "zeros$filter" ${filter:+--filter=$filter} memory 160M
  expect_copy --connections 2 --threads 2 --lanes 2 "$scratch/random.img" "$uri"
  expect_copy --connections 2 --threads 2 --lanes 2 "$scratch/sparse.img" "$uri"
  assert_eq "lanes (${filter:-WRITE_ZEROES})" "$(stat_field lanes)" 2
  (($(stat_field zero_requests) > 0)) || fail "no zero requests in lanes (${filter:-WRITE_ZEROES}): $out"
  read_export "$uri" "$scratch/zeros-back.img"
  same_content "$scratch/sparse.img" "$scratch/zeros-back.img"
done
uri=$mem_uri

log "plain, reading over 3 connections on 3 loops"
expect_copy --connections 3 --threads 3 "$uri" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"
assert_eq "loops" "$(stat_field loops)" 3

log "the default: a loop per connection, up to the CPUs; --threads 1 keeps one"
expect_copy "$scratch/random.img" "$uri"
assert_default_connections "$uri"
assert_eq "loops" "$(stat_field loops)" "$((cpus >= 2 && default_connections == 2 ? 2 : 1))"
assert_eq "lanes by default, one per loop" "$(stat_field lanes)" "$(stat_field loops)"
expect_copy --threads 1 "$scratch/random.img" "$uri"
assert_eq "loops" "$(stat_field loops)" 1
assert_eq "lanes on one loop" "$(stat_field lanes)" 1
read_export "$uri" "$scratch/readback-1.img"
same_content "$scratch/random.img" "$scratch/readback-1.img"

log "TLS, the default threads, both ways"
make_pki "$scratch/pki"
nbdkit_tcp tlsmem --tls=require --tls-certificates="$scratch/pki" memory 96M
tls_uri="nbds://localhost:$port/?tls-certificates=$scratch/pki"
expect_copy "$scratch/random.img" "$tls_uri"
assert_default_connections "$tls_uri"
assert_eq "loops" "$(stat_field loops)" "$((cpus >= 2 && default_connections == 2 ? 2 : 1))"
expect_copy --connections 2 --threads 2 --lanes 2 "$scratch/random.img" "$tls_uri"
assert_eq "lanes over TLS" "$(stat_field lanes)" 2
read_export "$tls_uri" "$scratch/tls-lanes.img"
same_content "$scratch/random.img" "$scratch/tls-lanes.img"
expect_copy "$tls_uri" "$scratch/tls-back.img"
same_content "$scratch/random.img" "$scratch/tls-back.img"
expect_copy --threads 1 "$scratch/random.img" "$tls_uri"
assert_eq "loops" "$(stat_field loops)" 1

log "the extra loop's thread runs during the copy"
nbdkit_unix slow --filter=delay memory 96M wdelay=20ms
"$SLUICE" copy --connections 2 --threads 2 --depth 4 "$scratch/random.img" "$uri" 2>"$scratch/slow.err" &
copier=$!
seen=""
for ((i = 0; i < 100; i++)); do
  if grep -qx 'sluice-loop1' /proc/"$copier"/task/*/comm 2>/dev/null; then
    seen=yes
    break
  fi
  sleep 0.05
done
wait "$copier" || fail "the slow copy failed: $(cat "$scratch/slow.err")"
[[ $seen == yes ]] || fail "no thread named sluice-loop1 while copying with --threads 2"
read_export "$uri" "$scratch/slow-back.img"
same_content "$scratch/random.img" "$scratch/slow-back.img"

log "a server error on a connection on another loop, in lanes and in one"
nbdkit_unix werr --filter=error memory 96M error=EIO error-pwrite-rate=30%
for lanes in 2 1; do
  expect_failure "answered EIO" copy --connections 2 --threads 2 --lanes $lanes "$scratch/random.img" "$uri"
done
# Every write fails, in both lanes at once: still one error.
nbdkit_unix werr2 --filter=error memory 96M error=EIO error-pwrite-rate=100%
expect_failure "answered EIO" copy --connections 2 --threads 2 --lanes 2 "$scratch/random.img" "$uri"

log "the server killed while both loops write"
# The depth is pinned and each write held 0.5 s, so the copy (at least three rounds of
# writes) cannot finish before the kill, whatever round trip a loaded machine measures.
nbdkit_tcp victim --filter=log --filter=delay memory 1G wdelay=500ms logfile="$scratch/victim.log"
kill_when_busy "$scratch/victim.log" Write "$(cat "$pidfile_of_last")" &
expect_failure "NBD WRITE of " copy --connections 4 --threads 2 --depth 8 "$scratch/random.img" "$uri"
wait

log "ok"
