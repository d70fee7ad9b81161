#!/bin/bash
# The NBD client's spliced WRITEs (--zero-copy: payload file -> pipe -> socket, never
# read into Sluice's memory; zero runs inside data found by scanning a read-only
# mapping) against real servers: the data arrives exactly, over TCP and a Unix socket,
# with zero runs and holes kept; server errors, a killed server and a source that
# shrinks under the mapping (SIGBUS) each end the copy with one clear error.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy
requires_nbdkit_plugin memory
requires_nbdkit_plugin sparse-random
requires_nbdkit_filter error
requires_nbdkit_filter delay
requires_nbdkit_filter log

random_file "$scratch/random.img" 64M
# Data with a zero run inside it (the scan must find it and send it as a zero range),
# holes around, and an end that is not a multiple of 4096.
sparse_image "$scratch/sparse.img" $((96 * 1024 * 1024 + 1536)) 0 4M 40M 8M $((96 * 1024 * 1024)) 1536
write_zeros "$scratch/sparse.img" 1M 1M

for transport in tcp unix; do
  log "file -> nbdkit memory over $transport, spliced"
  "nbdkit_$transport" "mem-$transport" memory 128M
  expect_copy --zero-copy "$scratch/random.img" "$uri"
  (($(stat_field zero_copy_writes) > 0)) || fail "--zero-copy over $transport spliced nothing: $out"
  read_export "$uri" "$scratch/readback.img"
  same_prefix "$scratch/random.img" "$scratch/readback.img"

  expect_copy --zero-copy "$scratch/sparse.img" "$uri"
  (($(stat_field zero_copy_writes) > 0)) || fail "--zero-copy spliced nothing of the sparse image: $out"
  read_export "$uri" "$scratch/readback.img"
  same_prefix "$scratch/sparse.img" "$scratch/readback.img"
done

log "one request at a time, small requests, every payload spliced"
nbdkit_unix small memory 128M
expect_copy --zero-copy --depth 1 --request-size 64k --connections 1 "$scratch/sparse.img" "$uri"
read_export "$uri" "$scratch/readback.img"
same_prefix "$scratch/sparse.img" "$scratch/readback.img"

log "a server error on every write"
nbdkit_unix werr --filter=error memory 128M error=EIO error-pwrite-rate=100%
expect_failure "NBD WRITE of " copy --zero-copy "$scratch/random.img" "$uri"
[[ $err == *" at offset "*"EIO"* ]] || fail "the failure does not name the offset and EIO: $err"

log "a server error on 1% of writes"
nbdkit_unix werr1 --filter=error memory 128M error=EIO error-pwrite-rate=1%
expect_failure "NBD WRITE of " copy --zero-copy --request-size 64k "$scratch/random.img" "$uri"

log "the server killed while we write"
random_file "$scratch/big.img" 256M
nbdkit_tcp victim --filter=log --filter=delay memory 512M wdelay=100ms logfile="$scratch/victim.log"
kill_when_busy "$scratch/victim.log" Write "$(cat "$pidfile_of_last")" &
expect_failure "NBD WRITE of " copy --zero-copy "$scratch/big.img" "$uri"
wait

log "a source that shrinks under the mapping"
# Slow writes keep the copy going; cut to 1 MiB, the next range mapped lies past the
# end, and touching it raises SIGBUS, which the scan turns into the usual error.
cp "$scratch/random.img" "$scratch/shrinking.img"
nbdkit_unix slow --filter=log --filter=delay memory 128M wdelay=20ms logfile="$scratch/slow.log"
run_sluice copy --zero-copy --depth 1 --request-size 64k --connections 1 "$scratch/shrinking.img" "$uri" &
copy_pid=$!
# Cut once the writes have started (the copy has sized and mapped its source), not
# after a fixed sleep that a slow sanitizer start could outlast.
for ((i = 0; i < 600; i++)); do
  grep -q " Write id=" "$scratch/slow.log" 2>/dev/null && break
  sleep 0.05
done
truncate -s 1M "$scratch/shrinking.img"
wait "$copy_pid" || true
# run_sluice ran in a subshell: read what it left.
err=$(cat "$scratch/.stderr")
[[ $err == *shrank* ]] || fail "the source shrank under the mapping, yet: ${err:-no error}"
[[ $err != *"internal error"* ]] || fail "an internal error: $err"

log "ok"
