#!/bin/bash
# sluice demo: generates a sparse image, copies it through the engine, verifies it.
. "$(dirname "$0")/functions.sh"

log "sluice demo --size 256M"
TMPDIR=$scratch expect_ok "$SLUICE" demo --size 256M
[[ $out == *"OK: the copy is identical to the source."* ]] || fail "demo did not say OK: $out"
[[ $out =~ throughput\ +[0-9]+\ MiB/s ]] || fail "demo printed no throughput: $out"
[[ $out == *" in $scratch/sluice-demo."* ]] || fail "demo did not work under \$TMPDIR: $out"
leftovers=$(find "$scratch" -mindepth 1 -name 'sluice-demo.*')
[[ -z $leftovers ]] || fail "demo left its work directory behind: $leftovers"

# Check its claim independently: keep the images and compare them here.
log "sluice demo --keep, compared with cmp"
mkdir "$scratch/keep"
expect_ok "$SLUICE" demo --size 64M --dir "$scratch/keep" --keep
same_content "$scratch/keep/source.img" "$scratch/keep/copy.img"
assert_eq "size of the demo image" "$(size_of "$scratch/keep/source.img")" $((64 << 20))
assert_le "allocated bytes of the demo copy" \
  "$(allocated_bytes "$scratch/keep/copy.img")" "$(allocated_bytes "$scratch/keep/source.img")"
(($(allocated_bytes "$scratch/keep/source.img") < 64 << 20)) || fail "the demo image is not sparse"

expect_fail 2 "--size" "$SLUICE" demo --size 1M
expect_fail 2 "unknown demo option" "$SLUICE" demo --bogus

log "ok"
