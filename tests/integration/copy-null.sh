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
# null: keeps nothing, so the allocated zeros are not looked for: passed on as data.
assert_eq "bytes_written: all the data, its zero blocks too" "$(json_field "$out" bytes_written)" $((8 * M))
assert_eq "every byte accounted for" \
  $(($(json_field "$out" bytes_written) + $(json_field "$out" bytes_zeroed) + $(json_field "$out" bytes_skipped))) \
  $((64 * M))

# Lanes: stripes of 64 MiB claimed by two threads. A data extent runs over the stripe
# boundary at 64M and a hole over the one at 128M; the counts are those of one lane.
sparse_file "$scratch/striped" 300M
write_random "$scratch/striped" 60M 10M
write_random "$scratch/striped" 200M 3M
write_random "$scratch/striped" 299M 1M
data=$(data_bytes "$scratch/striped")
expect_ok "$SLUICE" copy --stats --lanes 1 "$scratch/striped" null:
one_lane=$out
assert_eq "lanes when asked for one" "$(json_field "$one_lane" lanes)" 1
expect_ok "$SLUICE" copy --stats --lanes 2 "$scratch/striped" null:
assert_eq "lanes when asked for two" "$(json_field "$out" lanes)" 2
# The plan --stats prints: the depth shared by the lanes, no zeros looked for.
assert_eq "the plan's lanes" "$(json_field "$out" plan.lanes)" 2
assert_eq "the plan's lane depth" "$(json_field "$out" plan.lane_depth)" 4
assert_eq "the plan's stripe" "$(json_field "$out" plan.stripe_size)" $((64 * M))
assert_eq "the plan's zero scan into null:" "$(json_field "$out" plan.zero_scan)" none
for field in bytes_read bytes_written data_extents hole_extents zero_extents reads; do
  assert_eq "$field in two lanes" "$(json_field "$out" "$field")" "$(json_field "$one_lane" "$field")"
done
assert_eq "bytes_read in two lanes" "$(json_field "$out" bytes_read)" "$data"
assert_eq "data extents" "$(json_field "$out" data_extents)" 3
# The lanes share the depth: never more buffers than it allows.
expect_ok "$SLUICE" copy --stats --lanes 4 --depth 4 "$scratch/striped" null:
assert_eq "four lanes at depth 4" "$(json_field "$out" lanes)" 4
(($(json_field "$out" peak_buffers) <= 4)) || fail "four lanes at depth 4 held $(json_field "$out" peak_buffers) buffers"
assert_eq "bytes_read in four lanes" "$(json_field "$out" bytes_read)" "$data"
# More lanes than the depth allows: as many as it does.
expect_ok "$SLUICE" copy --stats --lanes 8 --depth 2 "$scratch/striped" null:
assert_eq "lanes at depth 2" "$(json_field "$out" lanes)" 2
# A file destination takes one lane whatever is asked.
expect_ok "$SLUICE" copy --stats --lanes 2 "$scratch/striped" "$scratch/striped.copy"
assert_eq "lanes to a file" "$(json_field "$out" lanes)" 1
same_content "$scratch/striped" "$scratch/striped.copy"
# One stripe: one lane, even when asked for more.
expect_ok "$SLUICE" copy --stats --lanes 2 "$scratch/random" null:
assert_eq "lanes for a single stripe" "$(json_field "$out" lanes)" 1
expect_fail 2 "--lanes must be between 1 and 64" "$SLUICE" copy --lanes 0 "$scratch/random" null:

# null: is a destination only: as a source, a usage error.
expect_fail 2 "'null:' can only be a destination: it discards" "$SLUICE" copy null: "$scratch/x"
[[ ! -e $scratch/x ]] || fail "a failed copy from null: created its destination"

log "ok"
