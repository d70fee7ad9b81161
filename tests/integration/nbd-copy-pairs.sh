#!/bin/bash
# Every copy pair through nbdkit's memory plugin, over TCP and a Unix socket:
# file -> nbd, nbd -> file, nbd -> null:, nbd -> nbd, nbd -> Chunked and raw streams;
# `sluice info` on an export;
# tcp:// and unix:// with --protocol nbd; the allocation map as the source's extents;
# --allocated (WRITE_ZEROES with NO_HOLE, seen in nbdkit's log) and the default
# (WRITE_ZEROES that may punch). Every copy is checked by reading the export back with
# libnbd's nbdcopy.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy
requires_nbdkit_plugin memory
requires_nbdkit_filter log

# 64 MiB random, and a 1 GiB sparse image with data at unaligned-to-each-other places.
random_file "$scratch/random.img" 64M
sparse_image "$scratch/sparse.img" 1G 0 64K 100M 3M 900M 1M 1073676288 64K

log "file -> nbd (TCP) -> file"
nbdkit_tcp mem1 memory 64M
tcp_uri=$uri
expect_copy "$scratch/random.img" "$tcp_uri"
# nbdkit memory advertises multi-conn: the default is two connections there, as long
# as its handshake measured it near (nbd-far-server tests the rest).
assert_default_connections "$tcp_uri"
read_export "$tcp_uri" "$scratch/readback.img"
same_content "$scratch/random.img" "$scratch/readback.img"
expect_copy "$tcp_uri" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"

log "nbd -> null:"
expect_copy "$tcp_uri" null:
assert_eq "bytes read" "$(stat_field bytes_read)" $((64 << 20))

log "tcp:// with --protocol nbd, both directions"
expect_copy --protocol nbd "$scratch/random.img" "tcp://127.0.0.1:$port/"
expect_copy --protocol nbd "tcp://127.0.0.1:$port/" "$scratch/back2.img"
same_content "$scratch/random.img" "$scratch/back2.img"

log "sparse file -> nbd (Unix socket), log shows zeroing that may punch"
nbdkit_unix mem2 --filter=log memory 1G logfile="$scratch/mem2.log"
unix_uri=$uri
expect_copy "$scratch/sparse.img" "$unix_uri"
assert_eq "bytes written" "$(stat_field bytes_written)" $(((64 + 3072 + 1024 + 64) << 10))
read_export "$unix_uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"
grep -q ' Zero .* trim=1 ' "$scratch/mem2.log" || fail "no WRITE_ZEROES that may punch in the log"
! grep -q ' Trim ' "$scratch/mem2.log" || fail "TRIM was used to zero"
grep -q ' Flush ' "$scratch/mem2.log" || fail "no FLUSH at the end"

log "sluice info reads the allocation map window by window"
run_sluice info --json "$unix_uri"
assert_eq "info exit" "$status" 0
allocated=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["allocated"])' "$out")
assert_eq "allocated bytes in the map" "$allocated" $(((64 + 3072 + 1024 + 64) << 10))

log "the map of a large export is asked for in windows of at most 1 GiB"
nbdkit_unix mem6 --filter=log memory 8G logfile="$scratch/mem6.log"
run_sluice info "$uri"
assert_eq "info exit" "$status" 0
"$PYTHON" - "$scratch/mem6.log" <<'PY' || fail "BLOCK_STATUS requests were not windowed"
import re, sys
counts = [int(m.group(1), 16) for m in re.finditer(r" Extents id=\d+ offset=0x[0-9a-f]+ count=(0x[0-9a-f]+)", open(sys.argv[1]).read())]
assert len(counts) >= 8, counts
assert max(counts) <= 1 << 30, counts
PY

log "nbd -> file keeps holes as holes and reads only data"
expect_copy "$unix_uri" "$scratch/back3.img"
same_content "$scratch/sparse.img" "$scratch/back3.img"
assert_eq "bytes read" "$(stat_field bytes_read)" $(((64 + 3072 + 1024 + 64) << 10))
(($(stat -c %b "$scratch/back3.img") * 512 < 64 << 20)) || fail "the copy of a sparse export is not sparse"

log "unix:// with --protocol nbd"
expect_copy --protocol nbd "unix://$scratch/mem2.sock" "$scratch/back4.img"
same_content "$scratch/sparse.img" "$scratch/back4.img"

log "--allocated: WRITE_ZEROES with NO_HOLE"
nbdkit_unix mem3 --filter=log memory 1G logfile="$scratch/mem3.log"
expect_copy --allocated "$scratch/sparse.img" "$uri"
grep -q ' Zero .* trim=0 ' "$scratch/mem3.log" || fail "--allocated sent no NO_HOLE WRITE_ZEROES"
! grep -q ' Zero .* trim=1 ' "$scratch/mem3.log" || fail "--allocated sent a WRITE_ZEROES that may punch"
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"

log "--prezeroed skips the zero ranges; --no-flush skips FLUSH"
nbdkit_unix mem4 --filter=log memory 1G logfile="$scratch/mem4.log"
expect_copy --prezeroed --no-flush "$scratch/sparse.img" "$uri"
! grep -q ' Zero ' "$scratch/mem4.log" || fail "--prezeroed still zeroed"
! grep -q ' Flush ' "$scratch/mem4.log" || fail "--no-flush still flushed"
# nbdkit logs the disconnect once its worker threads have ended, a moment after ours.
for ((i = 0; i < 100; i++)); do grep -q ' Disconnect ' "$scratch/mem4.log" && break; sleep 0.1; done
grep -q ' Disconnect ' "$scratch/mem4.log" || fail "no clean disconnect"
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"

log "--destination-is-zero is --prezeroed by its other name; the FLUSH stays"
nbdkit_unix mem4b --filter=log memory 1G logfile="$scratch/mem4b.log"
expect_copy --destination-is-zero "$scratch/sparse.img" "$uri"
! grep -q ' Zero ' "$scratch/mem4b.log" || fail "--destination-is-zero still zeroed"
grep -q ' Flush ' "$scratch/mem4b.log" || fail "a copy without --no-flush did not flush"
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"

log "nbd -> nbd (TCP source, Unix destination)"
nbdkit_unix mem5 memory 1G
expect_copy "$unix_uri" "$uri"
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/sparse.img" "$scratch/readback.img"

log "nbd -> Chunked (TCP) and raw (Unix socket) streams, received by sluice serve"
# The NBD source's extents drive the stream: Chunked skips nothing without --prezeroed
# (the receiver never zero-fills), raw sends every byte.
for protocol in chunked raw; do
  case $protocol in
    chunked) listen="tcp://127.0.0.1:$(free_port)" ;;
    raw) listen="unix://$scratch/recv.sock" ;;
  esac
  "$SLUICE" serve --listen "$listen" --protocol "$protocol" --output "$scratch/recv-$protocol.img" --size 1G \
    --once >"$scratch/serve-$protocol.log" 2>&1 &
  serve_pid=$!
  on_exit "kill $serve_pid 2>/dev/null"
  wait_listening "$listen" || fail "sluice serve ($protocol) is not listening: $(cat "$scratch/serve-$protocol.log")"
  expect_copy --protocol "$protocol" "$unix_uri" "$listen"
  wait "$serve_pid" || fail "sluice serve ($protocol) failed: $(cat "$scratch/serve-$protocol.log")"
  same_content "$scratch/sparse.img" "$scratch/recv-$protocol.img"
done

log "malformed NBD URIs are usage errors, said before the source is opened"
expect_fail 2 "needs ?socket=PATH" "$SLUICE" copy "$scratch/random.img" "nbd+unix:///"
expect_fail 2 "unknown parameter 'bogus'" "$SLUICE" copy "$scratch/random.img" "$tcp_uri?bogus=1"
expect_fail 2 "unknown parameter 'bogus'" "$SLUICE" copy "$tcp_uri?bogus=1" "$scratch/never.img"
[[ ! -e $scratch/never.img ]] || fail "a copy from a malformed URI created its destination"
expect_fail 2 "unknown parameter 'bogus'" "$SLUICE" info "$tcp_uri?bogus=1"
log "ok"
