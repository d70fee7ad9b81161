#!/bin/bash
# apps/examples/embed_copy: the public C++ API used the way a toolstack embeds it.
. "$(dirname "$0")/functions.sh"

EMBED_COPY=${EMBED_COPY:-$BUILD_ROOT/apps/examples/embed_copy}
[[ -x $EMBED_COPY ]] || fail "no embed_copy binary at '$EMBED_COPY'"

M=$((1024 * 1024))
sparse_file "$scratch/src.img" $((48 * M + 1234))
write_random "$scratch/src.img" 0 3M
write_random "$scratch/src.img" 17M 5M
write_zeros "$scratch/src.img" 18M 1M
write_random "$scratch/src.img" 48M 1234

log "a sparse copy through the API"
expect_ok "$EMBED_COPY" "$scratch/src.img" "$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"
assert_le "allocated bytes of the copy" "$(allocated_bytes "$scratch/dst.img")" "$(allocated_bytes "$scratch/src.img")"
[[ $err == *"copied $((48 * M + 1234)) bytes"* ]] || fail "embed_copy did not report the copy: $err"

log "through file:// URIs, onto the existing copy"
expect_ok "$EMBED_COPY" "file://$scratch/src.img" "file://$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"

log "cancelled by its deadline"
random_file "$scratch/big.img" 256M
expect_fail 1 "copy failed: the transfer was cancelled" "$EMBED_COPY" "$scratch/big.img" null: 0

expect_fail 1 "copy failed: $scratch/missing.img: No such file or directory" \
  "$EMBED_COPY" "$scratch/missing.img" "$scratch/out.img"
expect_fail 2 "usage" "$EMBED_COPY" "$scratch/src.img"

log "ok"
