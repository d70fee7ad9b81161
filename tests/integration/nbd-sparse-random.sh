#!/bin/bash
# nbdkit's sparse-random plugin checks every write: with the same seed, a destination
# accepts exactly the data (and zeros) its twin source serves, and answers anything
# else with EIO. Copying one export onto another with the same seed proves every byte;
# a different seed is the negative control that shows the check is live.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit
requires_nbdkit_plugin sparse-random

size=2G
seed=$((RANDOM + 1))

nbdkit_unix source sparse-random size=$size seed=$seed
source_uri=$uri

log "sparse-random -> sparse-random, same seed (nbdkit verifies every write)"
nbdkit_tcp same sparse-random size=$size seed=$seed
expect_copy "$source_uri" "$uri"
(($(stat_field bytes_read) > 0)) || fail "nothing was read"
(($(stat_field bytes_read) < $(to_bytes $size))) || fail "the allocation map was not used: every byte was read"
(($(stat_field hole_extents) + $(stat_field zero_extents) > 0)) || fail "no empty extents in the map"

log "the same with 4 connections on each side (multi-conn) and small requests"
nbdkit_tcp same4 sparse-random size=$size seed=$seed
expect_copy --connections 4 --request-size 256k --depth 32 "$source_uri" "$uri"
assert_eq "connections" "$(stat_field connections)" 4

log "sparse-random -> null:"
expect_copy "$source_uri" null:

log "negative control: a different seed must fail, naming the WRITE (or WRITE_ZEROES) and its offset"
# The copy then cuts its source connections mid-READ, which can make nbdkit 1.32 abort
# (an assertion in raw_send_socket): the READs still in flight then fail too, and the
# copy must still name the WRITE that stopped it.
nbdkit_tcp other sparse-random size=$size seed=$((seed + 1))
expect_failure "NBD WRITE" copy "$source_uri" "$uri"
[[ $err == *" at offset "*"EIO"* ]] || fail "the failure does not name the offset and EIO: $err"
log "ok"
