#!/bin/bash
# sluice copy between local files: every byte equal (cmp), holes kept as holes,
# allocated zeros turned into holes, and the options that change how zeros and
# requests are handled.
. "$(dirname "$0")/functions.sh"

holes_supported "$scratch" || skip "the filesystem of $scratch does not report holes (SEEK_HOLE)"

K=1024
M=$((1024 * 1024))

# copy_and_check SOURCE DESTINATION [OPTIONS...]: copy, then the destination must
# equal the source and be allocated no more than it.
copy_and_check() {
  local src=$1 dst=$2
  shift 2
  expect_ok "$SLUICE" copy "$@" "$src" "$dst"
  local src_path=${src#file://} dst_path=${dst#file://}
  same_content "$src_path" "$dst_path"
  assert_le "allocated bytes of $dst_path vs its source" \
    "$(allocated_bytes "$dst_path")" "$(allocated_bytes "$src_path")"
}

# assert_map FILE EXPECTED: FILE's data extents, "offset length" per line.
assert_map() {
  local got
  got=$(data_map "$1")
  [[ $got == "$2" ]] || fail "data extents of $1:"$'\n'"$got"$'\n'"expected:"$'\n'"$2"
}

# --- images with holes in every place, and awkward sizes ---------------------------

img=$scratch/images
mkdir "$img"

: >"$img/empty"

sparse_file "$img/hole-start" 6M
write_random "$img/hole-start" 2M 4M

sparse_file "$img/hole-middle" 6M
write_random "$img/hole-middle" 0 1M
write_random "$img/hole-middle" 5M 1M

sparse_file "$img/hole-end" 9M
write_random "$img/hole-end" 0 1M

# A multiple of 512 but not of 4096, data in the partial last block.
sparse_file "$img/size-512" $((5 * M + 1536))
write_random "$img/size-512" 1M 1M
write_random "$img/size-512" $((5 * M + 1000)) 536

# Not even a multiple of 512.
sparse_file "$img/size-odd" $((3 * M + 777))
write_random "$img/size-odd" 0 64K
write_random "$img/size-odd" 3M 777

random_file "$img/random" $((7 * M + 333))

# Allocated zeros inside data: they must come out as holes.
random_file "$img/zeros" 8M
write_zeros "$img/zeros" 1M 2M
write_zeros "$img/zeros" $((5 * M)) 4K

# Nothing but allocated zeros.
random_file "$img/all-zeros" 4M
write_zeros "$img/all-zeros" 0 4M

[[ $(data_map "$img/zeros") == "0 $((8 * M))" ]] || skip "explicit zeros are not allocated on this filesystem"

out_dir=$scratch/out
mkdir "$out_dir"
for name in empty hole-start hole-middle hole-end size-512 size-odd random zeros all-zeros; do
  src=$img/$name
  for src_form in path uri; do
    for dst_form in path uri; do
      dst=$out_dir/$name.$src_form.$dst_form
      from=$src
      to=$dst
      [[ $src_form == uri ]] && from=file://$src
      [[ $dst_form == uri ]] && to=file://$dst
      copy_and_check "$from" "$to"
    done
  done
  # Holes stay holes: same data extents as the source (the zero images differ below).
  case $name in
    zeros | all-zeros) ;;
    *) assert_map "$out_dir/$name.path.path" "$(data_map "$src")" ;;
  esac
done

assert_eq "size of the empty copy" "$(size_of "$out_dir/empty.path.path")" 0
assert_map "$out_dir/zeros.path.path" "0 $M
$((3 * M)) $((2 * M))
$((5 * M + 4 * K)) $((3 * M - 4 * K))"
assert_map "$out_dir/all-zeros.path.path" ""
assert_le "allocated bytes of the all-zeros copy" "$(allocated_bytes "$out_dir/all-zeros.path.path")" $((4 * K))

# --- one mixed image through the options -------------------------------------------

mixed=$img/mixed
mixed_size=$((40 * M + 1234))
sparse_file "$mixed" "$mixed_size"
write_random "$mixed" 1M 300K
write_random "$mixed" $((3 * M + 512)) 100000 # unaligned both ends
write_random "$mixed" 7M 3M
write_zeros "$mixed" 8M 128K # 64k-aligned: found at --sparse=64k too
write_random "$mixed" 12M 1M
write_zeros "$mixed" $((12 * M + 4 * K)) 16K # holds no aligned 64k block
write_random "$mixed" 20M 8M
write_random "$mixed" $((40 * M - 12 * K)) $((12 * K + 1234))

mixed_map="$M $((300 * K))
$((3 * M)) 102400
$((7 * M)) $((3 * M))
$((12 * M)) $M
$((20 * M)) $((8 * M))
$((40 * M - 12 * K)) $((12 * K + 1234))"
assert_map "$mixed" "$mixed_map"

# Both zero runs become holes (default 4k detection).
sparse_4k_map="$M $((300 * K))
$((3 * M)) 102400
$((7 * M)) $M
$((8 * M + 128 * K)) $((2 * M - 128 * K))
$((12 * M)) $((4 * K))
$((12 * M + 20 * K)) $((M - 20 * K))
$((20 * M)) $((8 * M))
$((40 * M - 12 * K)) $((12 * K + 1234))"
# At 64k granularity only the aligned 128k run does.
sparse_64k_map="$M $((300 * K))
$((3 * M)) 102400
$((7 * M)) $M
$((8 * M + 128 * K)) $((2 * M - 128 * K))
$((12 * M)) $M
$((20 * M)) $((8 * M))
$((40 * M - 12 * K)) $((12 * K + 1234))"

copy_and_check "$mixed" "$out_dir/mixed.default"
assert_map "$out_dir/mixed.default" "$sparse_4k_map"

log "--no-zero-copy: through buffers, each short run written on its own"
copy_and_check "$mixed" "$out_dir/mixed.buffered" --no-zero-copy
assert_map "$out_dir/mixed.buffered" "$sparse_4k_map"

log "scattered zero blocks: one short write per run of data, every byte in place"
# The short runs go as buffers in linked chains of writes: read into the pool with
# --no-zero-copy, straight from the scanned mapping of the source with --zero-copy
# (no pool buffer, no splice per run).
scattered=$img/scattered
/usr/bin/python3 - "$scattered" <<'PY'
import os, sys
block = 4096
with open(sys.argv[1], "wb") as f:
    for i in range(2048):  # 8 MiB: every third block zero, runs of 8 KiB between them
        f.write(bytes(block) if i % 3 == 0 else os.urandom(block))
PY
for mode in --no-zero-copy --zero-copy; do
  copy_and_check "$scattered" "$out_dir/scattered$mode" "$mode" --stats
  assert_le "allocated bytes of the scattered copy ($mode)" \
    "$(allocated_bytes "$out_dir/scattered$mode")" $((8 * M - 600 * 4 * K))
  # 683 runs of data, a few cut in two where requests end.
  assert_le "writes of the scattered copy, one per run ($mode)" 683 "$(json_field "$out" writes)"
  assert_le "writes of the scattered copy, at most one per run and request ($mode)" "$(json_field "$out" writes)" 700
  assert_eq "spliced writes of the scattered copy ($mode)" "$(json_field "$out" zero_copy_writes)" 0
  # The plan --stats prints says where the zeros were looked for.
  if [[ $mode == --zero-copy ]]; then
    assert_eq "the plan's zero scan ($mode)" "$(json_field "$out" plan.zero_scan)" in_place
    assert_eq "the plan's payload by reference ($mode)" "$(json_field "$out" plan.by_reference)" True
  else
    assert_eq "the plan's zero scan ($mode)" "$(json_field "$out" plan.zero_scan)" in_buffers
    assert_eq "the plan's payload by reference ($mode)" "$(json_field "$out" plan.by_reference)" False
  fi
done
assert_eq "pool buffers of the scattered copy from the mapping" "$(json_field "$out" peak_buffers)" 0

log "--sparse=0: zero detection off, the allocated zeros are written as data"
expect_ok "$SLUICE" copy --sparse=0 --stats "$mixed" "$out_dir/mixed.sparse0"
same_content "$mixed" "$out_dir/mixed.sparse0"
assert_map "$out_dir/mixed.sparse0" "$mixed_map"
assert_eq "bytes_written with --sparse=0" "$(json_field "$out" bytes_written)" "$(data_bytes "$mixed")"

log "options may follow the operands (GNU style), and -- ends them"
expect_ok "$SLUICE" copy "$mixed" "$out_dir/mixed.late-options" --sparse=0 --stats
same_content "$mixed" "$out_dir/mixed.late-options"
assert_map "$out_dir/mixed.late-options" "$mixed_map"  # --sparse=0 took effect
assert_eq "bytes_written with a trailing --sparse=0" "$(json_field "$out" bytes_written)" "$(data_bytes "$mixed")"
cp "$mixed" "$out_dir/-dash.img"
(cd "$out_dir" && expect_ok "$SLUICE" copy -- -dash.img -dash.copy)
same_content "$mixed" "$out_dir/-dash.copy"

log "--sparse=64k"
copy_and_check "$mixed" "$out_dir/mixed.sparse64k" --sparse=64k
assert_map "$out_dir/mixed.sparse64k" "$sparse_64k_map"

for depth in 1 64; do
  for request in 64k 8M; do
    log "--depth $depth --request-size $request"
    copy_and_check "$mixed" "$out_dir/mixed.$depth.$request" --depth "$depth" --request-size "$request"
    assert_map "$out_dir/mixed.$depth.$request" "$sparse_4k_map"
    copy_and_check "$img/random" "$out_dir/random.$depth.$request" --depth "$depth" --request-size "$request"
  done
done

log "onto an existing, larger file full of data: the result is exactly the source"
random_file "$out_dir/larger" $((2 * mixed_size))
copy_and_check "$mixed" "$out_dir/larger"
assert_map "$out_dir/larger" "$sparse_4k_map"

log "onto an existing, smaller file"
random_file "$out_dir/smaller" 1M
copy_and_check "$mixed" "$out_dir/smaller"

log "--prezeroed: zero ranges are skipped, nothing is zeroed explicitly"
random_file "$out_dir/prezeroed" 64M
expect_ok "$SLUICE" copy --prezeroed --stats "$mixed" "$out_dir/prezeroed"
same_content "$mixed" "$out_dir/prezeroed"
assert_eq "bytes_zeroed with --prezeroed" "$(json_field "$out" bytes_zeroed)" 0
assert_eq "bytes_written + bytes_skipped with --prezeroed" \
  $(($(json_field "$out" bytes_written) + $(json_field "$out" bytes_skipped))) "$mixed_size"

log "--allocated: zero ranges are allocated, not holes"
expect_ok "$SLUICE" copy --allocated --stats "$mixed" "$out_dir/allocated"
same_content "$mixed" "$out_dir/allocated"
assert_eq "bytes_skipped with --allocated" "$(json_field "$out" bytes_skipped)" 0
assert_eq "bytes_written + bytes_zeroed with --allocated" \
  $(($(json_field "$out" bytes_written) + $(json_field "$out" bytes_zeroed))) "$mixed_size"
fully=$((mixed_size / 4096 * 4096))
(($(allocated_bytes "$out_dir/allocated") >= fully)) ||
  fail "--allocated copy has only $(allocated_bytes "$out_dir/allocated") bytes allocated of $mixed_size"
# Without --allocated the same copy is far smaller: the check above means something.
assert_le "allocated bytes of the default copy" "$(allocated_bytes "$out_dir/mixed.default")" $((16 * M))

log "past 4 GiB: offsets that do not fit in 32 bits, a hole longer than the extent window"
G=$((1024 * M))
huge=$img/huge
sparse_file "$huge" $((5 * G + 512))
write_random "$huge" $((4 * G - M)) 2M
write_random "$huge" $((5 * G - 4 * K)) $((4 * K + 512))
expect_ok "$SLUICE" copy "$huge" "$out_dir/huge"
# cmp of 5 GiB of holes takes long on a shared machine: compare the data extents with
# cmp and prove the rest are holes in both (holes read as zeros).
huge_map="$((4 * G - M)) $((2 * M))
$((5 * G - 4 * K)) $((4 * K + 512))"
assert_map "$huge" "$huge_map"
assert_map "$out_dir/huge" "$huge_map"
assert_eq "size of the copy past 4 GiB" "$(size_of "$out_dir/huge")" $((5 * G + 512))
while read -r offset length; do
  cmp -i "$offset" -n "$length" "$huge" "$out_dir/huge" || fail "the copy past 4 GiB differs at [$offset, +$length)"
done <<<"$huge_map"
rm -f "$out_dir/huge"

log "--no-flush still copies every byte"
copy_and_check "$mixed" "$out_dir/mixed.noflush" --no-flush

log "ok"
