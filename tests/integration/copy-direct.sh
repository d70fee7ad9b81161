#!/bin/bash
# sluice copy --direct: both ends opened with O_DIRECT, aligned requests go around the
# page cache, an unaligned tail still lands; the copy equals the source.
. "$(dirname "$0")/functions.sh"
requires strace

dd if=/dev/zero of="$scratch/probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null ||
  skip "the filesystem of $scratch does not support O_DIRECT"
rm -f "$scratch/probe"

M=$((1024 * 1024))

sparse_file "$scratch/unaligned" $((10 * M + 1234))
write_random "$scratch/unaligned" 0 1M
write_random "$scratch/unaligned" $((4 * M + 100)) 3M
write_random "$scratch/unaligned" $((10 * M)) 1234

random_file "$scratch/aligned" 16M
random_file "$scratch/tiny" 4095
sparse_file "$scratch/size-512" $((5 * M + 512))
write_random "$scratch/size-512" $((5 * M)) 512

for name in unaligned aligned tiny size-512; do
  for options in "" "--depth 1 --request-size 4k" "--depth 64 --request-size 8M" "--sparse=0"; do
    # shellcheck disable=SC2086 # options are words
    expect_ok "$SLUICE" copy --direct $options "$scratch/$name" "file://$scratch/$name.copy"
    same_content "$scratch/$name" "$scratch/$name.copy"
    rm -f "$scratch/$name.copy"
  done
done

# Onto an existing larger file: still exactly the source.
random_file "$scratch/larger" 32M
expect_ok "$SLUICE" copy --direct "$scratch/unaligned" "$scratch/larger"
same_content "$scratch/unaligned" "$scratch/larger"

# Both ends really are opened with O_DIRECT.
under_strace -f -e trace=openat -o "$scratch/trace" -- \
  "$SLUICE" copy --direct "$scratch/unaligned" "$scratch/traced.copy" >/dev/null
grep -E "openat\(.*\"$scratch/unaligned\", O_RDONLY.*O_DIRECT" "$scratch/trace" >/dev/null ||
  fail "the source was not opened with O_DIRECT: $(grep "$scratch" "$scratch/trace")"
grep -E "openat\(.*\"$scratch/traced.copy\", O_WRONLY.*O_DIRECT" "$scratch/trace" >/dev/null ||
  fail "the destination was not opened with O_DIRECT: $(grep "$scratch" "$scratch/trace")"
same_content "$scratch/unaligned" "$scratch/traced.copy"

# And without --direct, neither is (the check above can fail).
under_strace -f -e trace=openat -o "$scratch/trace" -- \
  "$SLUICE" copy "$scratch/unaligned" "$scratch/traced.copy" >/dev/null
if grep -E "\"$scratch/[^\"]*\", [^)]*O_DIRECT" "$scratch/trace" >/dev/null; then
  fail "O_DIRECT used without --direct"
fi

log "ok"
