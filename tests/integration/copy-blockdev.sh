#!/bin/bash
# sluice copy to and from block devices (loop devices): a device keeps its contents,
# so the zero ranges of the source must be zeroed on it explicitly; past the source's
# length the device is left alone; a device too small fails before anything is written.
. "$(dirname "$0")/functions.sh"
requires losetup
requires_root "attaching loop devices"

M=$((1024 * 1024))

# attach FILE [LOSETUP-OPTIONS]: a new loop device backed by FILE, detached on exit; its
# path in $device.
attach() {
  local reason
  if ! device=$(losetup --find --show "${@:2}" "$1" 2>"$scratch/losetup.err"); then
    reason=$(cat "$scratch/losetup.err")
    skip "no loop device available: ${reason:-losetup failed}"
  fi
  on_exit "losetup -d '$device'"
  [[ -b $device ]] || fail "losetup gave '$device', which is not a block device"
}

# assert_zeros DEVICE OFFSET LENGTH
assert_zeros() {
  cmp -n "$3" <(dd if="$1" bs=64K iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none) /dev/zero ||
    fail "$1 does not read as zeros at [$2, $(($2 + $3)))"
}

# The source: holes at the start, middle and end, allocated zeros, a size that is not
# a multiple of the device's 512-byte sectors.
src=$scratch/source.img
src_size=$((20 * M + 1536))
sparse_file "$src" "$src_size"
write_random "$src" 1M 3M
write_zeros "$src" 2M 1M
write_random "$src" 9M 5M
write_random "$src" $((20 * M)) 1536

# The device: 32 MiB of random data, so every zero range must really be zeroed.
random_file "$scratch/backing.orig" 32M
cp "$scratch/backing.orig" "$scratch/backing"
attach "$scratch/backing"
big=$device

check_device_copy() {
  same_prefix() { cmp -n "$src_size" "$src" "$big" || fail "$big differs from $src within its $src_size bytes"; }
  same_prefix
  assert_zeros "$big" 0 1M          # hole at the start
  assert_zeros "$big" 2M 1M         # allocated zeros
  assert_zeros "$big" 4M 5M         # hole in the middle
  assert_zeros "$big" 14M 6M        # hole before the tail
  # Past the source's length the device keeps what it had.
  cmp -i "$src_size" "$scratch/backing.orig" "$big" ||
    fail "$big was changed past the source's $src_size bytes"
}

for options in "" "--direct" "--allocated" "--sparse=0" "--depth 1 --request-size 64k"; do
  for form in path uri; do
    log "file -> $big ($form) $options"
    # Random again: each copy must zero the holes itself.
    dd if="$scratch/backing.orig" of="$big" bs=1M conv=fsync status=none
    to=$big
    [[ $form == uri ]] && to=file://$big
    # shellcheck disable=SC2086 # options are words
    expect_ok "$SLUICE" copy $options "$src" "$to"
    check_device_copy
  done
done

log "$big -> file"
expect_ok "$SLUICE" copy --stats "$big" "$scratch/from-device.img"
same_content "$big" "$scratch/from-device.img"
assert_eq "size read from the device" "$(json_field "$out" size)" $((32 * M))
# The device has no holes to report, but its zero ranges are found and become holes:
# left is the source's data without its zero megabyte, then the device's random tail.
got=$(data_map "$scratch/from-device.img")
want="$M $M
$((3 * M)) $M
$((9 * M)) $((5 * M))
$((20 * M)) $((12 * M))"
[[ $got == "$want" ]] || fail "data extents of the copy from $big:"$'\n'"$got"$'\n'"expected:"$'\n'"$want"
expect_ok "$SLUICE" copy --direct "file://$big" null:

log "a device smaller than the source"
random_file "$scratch/small.orig" 8M
cp "$scratch/small.orig" "$scratch/small"
attach "$scratch/small"
small=$device
expect_fail 1 "$small: the device (8388608 bytes) is smaller than the source ($src_size bytes)" \
  "$SLUICE" copy "$src" "$small"
cmp "$scratch/small.orig" "$small" || fail "the copy wrote to $small before failing"

log "a 4096-byte-sector device: an unaligned zero range falls back alone"
# The device refuses (EINVAL) to punch or zero 512 bytes it cannot address; that says
# nothing about aligned ranges, which must still be punched, not written as zeros (it
# used to turn punching off for the rest of the copy: the 12 MiB hole below was then
# written out, allocating the whole backing file).
unaligned=$scratch/unaligned.img
sparse_file "$unaligned" 16M
write_random "$unaligned" 0 4M
write_zeros "$unaligned" 512 512
random_file "$scratch/sector4k" 16M
attach "$scratch/sector4k" --sector-size 4096
sector4k=$device
if [[ $(blockdev --getss "$sector4k") != 4096 ]]; then
  log "losetup cannot give a 4096-byte logical sector here: not checked"
else
  # One request at a time, so the unaligned range is met before the hole.
  expect_ok "$SLUICE" copy --sparse=512 --depth 1 --request-size 64k "$unaligned" "$sector4k"
  cmp "$unaligned" "$sector4k" || fail "$sector4k differs from $unaligned"
  sync
  blocks=$(stat -c %b "$scratch/sector4k")
  # 4 MiB of data is 8192 blocks of 512 bytes; the hole written as zeros made it 32768.
  ((blocks < 16384)) || fail "the backing file has $blocks blocks allocated: the 12 MiB hole was written, not punched"
fi

log "a mounted device is refused, as destination, NBD export and serve output"
# Writing under a live filesystem destroys it: the device is opened O_EXCL, which the
# kernel refuses while it is mounted.
if command -v mkfs.ext4 >/dev/null; then
  truncate -s 32M "$scratch/mounted"
  attach "$scratch/mounted"
  mounted=$device
  # No lazy initialisation: the mounted filesystem then has nothing of its own to write.
  mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$mounted" || fail "mkfs.ext4 $mounted failed"
  mkdir "$scratch/mnt"
  mount "$mounted" "$scratch/mnt" || fail "cannot mount $mounted"
  on_exit "umount -l '$scratch/mnt'"
  echo "precious" >"$scratch/mnt/file"
  sync
  expect_fail 1 "$mounted: the device is in use (mounted" "$SLUICE" copy "$src" "$mounted"
  expect_fail 1 "$mounted: the device is in use (mounted" \
    timeout 10 "$SLUICE" serve --protocol nbd --listen "unix://$scratch/nbd.sock" --export "disk=$mounted"
  expect_fail 1 "$mounted: the device is in use (mounted" \
    timeout 10 "$SLUICE" serve --listen "unix://$scratch/stream.sock" --output "$mounted"
  # A live filesystem may still write its own blocks, so the device is not compared
  # whole: the source's random data must simply not be on it.
  ! cmp -s <(dd if="$src" bs=1M skip=9 count=5 status=none) <(dd if="$mounted" bs=1M skip=9 count=5 status=none) ||
    fail "the source's data was written onto the mounted $mounted"
  [[ $(cat "$scratch/mnt/file") == precious ]] || fail "the mounted filesystem lost its file"
  # Reading it is harmless and still allowed.
  expect_ok "$SLUICE" copy "$mounted" null:
else
  log "mkfs.ext4 is not installed: the mounted-device case is not checked"
fi

log "ok"
