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

log "sluice demo --dir: never overwrites, removes only what it made"
mkdir "$scratch/mine"
echo precious >"$scratch/mine/source.img"
expect_fail 1 "source.img: File exists; the demo does not overwrite files" "$SLUICE" demo --size 4M --dir "$scratch/mine"
assert_eq "the user's file after the demo refused it" "$(cat "$scratch/mine/source.img")" precious
mv "$scratch/mine/source.img" "$scratch/mine/copy.img"
expect_fail 1 "copy.img already exists" "$SLUICE" demo --size 4M --dir "$scratch/mine"
assert_eq "the user's file after the demo refused it" "$(cat "$scratch/mine/copy.img")" precious
[[ ! -e $scratch/mine/source.img ]] || fail "the refused demo left a source image"
rm "$scratch/mine/copy.img"
echo other >"$scratch/mine/other"
expect_ok "$SLUICE" demo --size 4M --dir "$scratch/mine"
[[ -d $scratch/mine && -f $scratch/mine/other ]] || fail "the demo removed a directory it did not make"
[[ ! -e $scratch/mine/source.img && ! -e $scratch/mine/copy.img ]] || fail "the demo left its images in --dir"
expect_ok "$SLUICE" demo --size 4M --dir "$scratch/new"
[[ ! -e $scratch/new ]] || fail "the demo left the directory it made"

log "sluice demo on a full filesystem names the cause"
if [[ $(id -u) -eq 0 ]] && mkdir "$scratch/full" && mount -t tmpfs -o size=4M sluice-test-demo "$scratch/full"; then
  on_exit "umount -l '$scratch/full'"
  expect_fail 1 "No space left on device" "$SLUICE" demo --size 64M --dir "$scratch/full"
  [[ -z $(ls -A "$scratch/full") ]] || fail "the failed demo left files behind: $(ls -A "$scratch/full")"
else
  log "skipped: mounting a small tmpfs needs root"
fi

expect_fail 2 "--size" "$SLUICE" demo --size 1M
expect_fail 2 "unknown or incomplete option '--bogus'" "$SLUICE" demo --bogus

log "ok"
