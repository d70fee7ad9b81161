#!/bin/bash
# nbdkit's null plugin: discards writes, reads as zeros (and says so in its map).
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit
requires_nbdkit_plugin null

random_file "$scratch/random.img" 256M

log "file -> nbdkit null over TCP"
nbdkit_tcp null1 null 256M
expect_copy "$scratch/random.img" "$uri"
assert_eq "bytes written" "$(stat_field bytes_written)" $((256 << 20))

log "a null export larger than the source is fine"
nbdkit_tcp null2 null 1G
expect_copy "$scratch/random.img" "$uri"

log "nbdkit null -> file: all zeros, nothing read (the map says zero)"
expect_copy "$uri" "$scratch/zeros.img"
assert_eq "bytes read" "$(stat_field bytes_read)" 0
cmp -n $((1 << 30)) "$scratch/zeros.img" /dev/zero >/dev/null 2>&1 || fail "the copy of null is not all zeros"
assert_eq "size" "$(size_of "$scratch/zeros.img")" $((1 << 30))
log "ok"
