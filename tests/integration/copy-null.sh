#!/bin/bash
# sluice copy SOURCE null: reads every data byte of the source and keeps nothing.
. "$(dirname "$0")/functions.sh"

M=$((1024 * 1024))

# Fully allocated: every byte is read.
random_file "$scratch/random" $((24 * M + 333))
expect_ok "$SLUICE" copy --stats "$scratch/random" null:
assert_eq "size" "$(json_field "$out" size)" $((24 * M + 333))
assert_eq "bytes_read of a random file" "$(json_field "$out" bytes_read)" $((24 * M + 333))
assert_eq "bytes_written counts what null: was given" "$(json_field "$out" bytes_written)" $((24 * M + 333))

# Also through a file:// source, small requests, depth 1.
expect_ok "$SLUICE" copy --stats --depth 1 --request-size 4k "file://$scratch/random" null:
assert_eq "bytes_read at depth 1" "$(json_field "$out" bytes_read)" $((24 * M + 333))
assert_eq "reads at 4k requests" "$(json_field "$out" reads)" $(((24 * M + 333 + 4095) / 4096))

# Sparse: the data extents are read, the holes are not.
sparse_file "$scratch/sparse" 64M
write_random "$scratch/sparse" 3M 2M
write_random "$scratch/sparse" 40M 5M
write_zeros "$scratch/sparse" 50M 1M
data=$(data_bytes "$scratch/sparse")
expect_ok "$SLUICE" copy --stats "$scratch/sparse" null:
assert_eq "bytes_read of a sparse file" "$(json_field "$out" bytes_read)" "$data"
assert_eq "bytes_written: data without its zero blocks" "$(json_field "$out" bytes_written)" $((7 * M))
assert_eq "every byte accounted for" \
  $(($(json_field "$out" bytes_written) + $(json_field "$out" bytes_zeroed) + $(json_field "$out" bytes_skipped))) \
  $((64 * M))

# null: is a destination only: as a source, a usage error.
expect_fail 2 "'null:' can only be a destination: it discards" "$SLUICE" copy null: "$scratch/x"
[[ ! -e $scratch/x ]] || fail "a failed copy from null: created its destination"

log "ok"
