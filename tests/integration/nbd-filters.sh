#!/bin/bash
# nbdkit filters that change what the client must do:
#  - delay: latency; the log shows several requests in flight (pipelining).
#  - blocksize-policy minimum=64K with error policy: any unaligned request would fail;
#    maximum=1K: the client's requests shrink to fit (and were refused before).
#  - extentlist: HOLE, ZERO and HOLE|ZERO map to hole, zero, hole (both bits count).
#  - noextents: a map that says "all data"; the copy is still correct.
#  - nozero: no WRITE_ZEROES; zeros become explicit WRITEs (never TRIM).
#  - --no-sr: simple replies only, no map; both directions work.
#  - old handshakes: oldstyle (-o) and newstyle without the fixed extension.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy
requires_nbdkit_plugin memory
requires_nbdkit_plugin file
for f in delay log blocksize-policy extentlist noextents nozero; do requires_nbdkit_filter $f; done

random_file "$scratch/random.img" 32M
# Data at 4 KiB granularity, deliberately off every 64 KiB boundary.
sparse_image "$scratch/sparse.img" 256M 4K 4K 100K 12K 1M 3M 200M 68K 268431360 4K

# max_in_flight LOG CMD: most requests of CMD (Write, Read) started and not yet
# returned at once, from nbdkit's log filter.
max_in_flight() {
  "$PYTHON" - "$1" "$2" <<'PY'
import re, sys
depth = best = 0
for line in open(sys.argv[1]):
    if re.search(r" %s id=\d+ " % sys.argv[2], line): depth += 1
    elif re.search(r" \.\.\.%s id=\d+ " % sys.argv[2], line): depth -= 1
    best = max(best, depth)
print(best)
PY
}

log "delay filter: writes and reads pipelined"
nbdkit_unix delayed --filter=log --filter=delay memory 32M rdelay=20ms wdelay=20ms logfile="$scratch/delay.log"
expect_copy --request-size 256k --depth 8 "$scratch/random.img" "$uri"
expect_copy --request-size 256k --depth 8 "$uri" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"
writes=$(max_in_flight "$scratch/delay.log" Write)
reads=$(max_in_flight "$scratch/delay.log" Read)
((writes >= 4)) || fail "at most $writes WRITEs were in flight at once (depth 8)"
((reads >= 4)) || fail "at most $reads READs were in flight at once (depth 8)"
log "in flight at once: $writes writes, $reads reads"

log "blocksize-policy: minimum 64 KiB, unaligned requests are errors"
nbdkit_unix aligned --filter=blocksize-policy memory 256M blocksize-minimum=64K \
  blocksize-preferred=64K blocksize-maximum=32M blocksize-error-policy=error
aligned_uri=$uri
expect_copy "$scratch/sparse.img" "$aligned_uri"
read_export "$aligned_uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"
expect_copy --request-size 4k "$aligned_uri" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
log "  (and the control: the same server refuses a 4 KiB request from libnbd's nbdsh)"
if PATH=/usr/bin:$PATH nbdsh -u "$aligned_uri" -c 'h.set_strict_mode(0)' -c 'h.pread(4096, 4096)' >/dev/null 2>&1; then
  fail "blocksize-policy accepted an unaligned request: the alignment check proves nothing"
fi
log "  a source that is not a whole number of 64 KiB blocks is refused before any write"
head -c $((1024 * 1024 + 4096)) /dev/urandom >"$scratch/ragged.img"
nbdkit_unix ragged --filter=blocksize-policy memory 4M blocksize-minimum=64K \
  blocksize-preferred=64K blocksize-maximum=32M blocksize-error-policy=error
expect_failure "takes whole blocks of 65536 bytes" copy "$scratch/ragged.img" "$uri"
read_export "$uri" "$scratch/ragged.back"
cmp -s "$scratch/ragged.back" <(head -c 4M /dev/zero) || fail "the refused copy wrote to the export"

log "blocksize-policy: maximum 1 KiB, longer requests are errors; both ways still copy"
# Requests under 4 KiB only because the server takes no more: slow, but correct.
head -c $((2 * 1024 * 1024)) /dev/urandom >"$scratch/small-max.img"
truncate -s 3M "$scratch/small-max.img"  # and a hole at the end
write_zeros "$scratch/small-max.img" 1500K 3K  # zeros in the data, scanned in 1 KiB requests
nbdkit_unix tiny --filter=blocksize-policy memory 3M blocksize-minimum=512 \
  blocksize-preferred=512 blocksize-maximum=1K blocksize-error-policy=error
expect_copy "$scratch/small-max.img" "$uri"
assert_eq "request size under a 1 KiB maximum" "$(stat_field request_size)" 1024
# Read back by libnbd in 1 KiB pieces (nbdcopy asks for more than the server takes).
/usr/bin/python3 - "$uri" "$scratch/small-max.back" <<'PY' || fail "libnbd could not read the export back"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
with open(sys.argv[2], "wb") as out:
    for offset in range(0, h.get_size(), 1024):
        out.write(h.pread(1024, offset))
h.shutdown()
PY
same_content "$scratch/small-max.img" "$scratch/small-max.back"
expect_copy "$uri" "$scratch/small-max.copy"
same_content "$scratch/small-max.img" "$scratch/small-max.copy"

log "a server that refuses long WRITE_ZEROES (EINVAL past 4 MiB, no advertised limit)"
# nbdkit's eval plugin over a file of random bytes: only zeroing proves the zero ranges.
if nbdkit eval --version >/dev/null 2>&1; then
  random_file "$scratch/picky.backing" 32M
  sparse_image "$scratch/picky.src" 32M 1M 1M 20M 1M
  backing=$scratch/picky.backing
  nbdkit_unix picky --filter=log eval logfile="$scratch/picky.log" \
    get_size="echo $((32 << 20))" \
    pread="dd if='$backing' skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none" \
    pwrite="dd of='$backing' seek=\$4 conv=notrunc oflag=seek_bytes status=none" \
    can_zero='exit 0' flush='exit 0' \
    zero="if [ \$3 -gt 4194304 ]; then echo 'EINVAL no more than 4 MiB at once' >&2; exit 1; fi
          fallocate -z -o \$4 -l \$3 '$backing'"
  expect_copy "$scratch/picky.src" "$uri"
  same_content "$scratch/picky.src" "$backing"
  grep -q 'Zero id=.* error=EINVAL' "$scratch/picky.log" || fail "the server refused no WRITE_ZEROES: the case proves nothing"
else
  log "  skipped: nbdkit has no eval plugin"
fi

log "extentlist: HOLE, ZERO and HOLE|ZERO all count as empty"
printf '%s\n' "0 1M" "1M 1M zero" "2M 1M hole" "3M 1M hole,zero" >"$scratch/extents.txt"
nbdkit_unix listed --filter=extentlist memory 4M extentlist="$scratch/extents.txt"
run_sluice info --json "$uri"
assert_eq "info exit" "$status" 0
kinds=$("$PYTHON" -c 'import json,sys; print(" ".join(e["type"] for e in json.loads(sys.argv[1])["extents"]))' "$out")
assert_eq "extent kinds" "$kinds" "data zero hole"

log "noextents: everything is data to the client, the copy is still exact"
nbdkit_unix noext --filter=noextents file file="$scratch/sparse.img"
expect_copy "$uri" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
assert_eq "bytes read without a map" "$(stat_field bytes_read)" $((256 << 20))

log "nozero: zero ranges become explicit WRITEs, never TRIM"
nbdkit_unix nozero --filter=log --filter=nozero memory 256M logfile="$scratch/nozero.log"
expect_copy "$scratch/sparse.img" "$uri"
! grep -q ' Zero \| Trim ' "$scratch/nozero.log" || fail "WRITE_ZEROES or TRIM reached a server without them"
written=$("$PYTHON" - "$scratch/nozero.log" <<'PY'
import re, sys
print(sum(int(m.group(1), 16) for m in re.finditer(r" Write id=\d+ offset=0x[0-9a-f]+ count=(0x[0-9a-f]+)", open(sys.argv[1]).read())))
PY
)
assert_eq "bytes written as WRITEs (data and zeros)" "$written" $((256 << 20))
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"

log "--no-sr: simple replies, no map"
nbdkit_tcp nosr --no-sr memory 256M
expect_copy "$scratch/sparse.img" "$uri"
expect_copy "$uri" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
assert_eq "bytes read without structured replies" "$(stat_field bytes_read)" $((256 << 20))
log "old handshakes: newstyle without the fixed extension (EXPORT_NAME only)"
nbdkit_unix plainnew --mask-handshake=0 --filter=log memory 256M logfile="$scratch/plainnew.log"
expect_copy "$scratch/sparse.img" "$uri"
expect_copy "$uri" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
grep -q 'Flush' "$scratch/plainnew.log" || fail "no FLUSH at the end"

log "old handshakes: oldstyle (the server describes its one export at once)"
# nbdkit 1.32 advertises FLUSH and WRITE_ZEROES on oldstyle connections, then refuses
# both with EINVAL (libnbd's nbdsh gets the same): this copy sends neither (the fresh
# export reads as zeros, so --prezeroed is true).
nbdkit_unix oldstyle -o memory 256M
expect_copy --no-flush --prezeroed "$scratch/sparse.img" "$uri"
expect_copy "$uri" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
expect_failure "has no STARTTLS" copy "$scratch/sparse.img" "nbds+unix:///?socket=$scratch/oldstyle.sock"
log "ok"
