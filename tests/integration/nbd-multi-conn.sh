#!/bin/bash
# --connections N: used when the server advertises CAN_MULTI_CONN (nbdkit memory),
# with requests spread over every connection and a FLUSH on each only after the last
# write completed; refused with one note on stderr when it is not advertised
# (qemu-nbd without --shared). Without the option: two connections where the server
# advertises it, one without a word where it does not.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit
requires_nbdkit_plugin memory
requires_nbdkit_filter log

random_file "$scratch/random.img" 128M

log "nbdkit memory: 4 connections"
nbdkit_unix mem --filter=log memory 128M logfile="$scratch/mem.log"
expect_copy --connections 4 --request-size 1M "$scratch/random.img" "$uri"
assert_eq "connections" "$(stat_field connections)" 4
"$PYTHON" - "$scratch/mem.log" <<'PY' || fail "multi-conn writes or flushes were wrong (see above)"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
connects = {m.group(1) for l in lines if (m := re.search(r"connection=(\d+) Connect ", l))}
writers = {m.group(1) for l in lines if (m := re.search(r"connection=(\d+) Write ", l))}
flushes = [i for i, l in enumerate(lines) if re.search(r"connection=\d+ Flush ", l)]
flushers = {re.search(r"connection=(\d+)", lines[i]).group(1) for i in flushes}
last_write_done = max(i for i, l in enumerate(lines) if re.search(r" \.\.\.Write id=\d+ return=0", l))
print("connections", sorted(connects), "writers", sorted(writers), "flushers", sorted(flushers))
assert len(connects) == 4, connects
assert writers == connects, "writes were not spread over every connection"
assert flushers == connects, "not every connection was flushed"
assert min(flushes) > last_write_done, "a FLUSH went out before the last write completed"
PY
read_export "$uri" "$scratch/readback.img"
same_content "$scratch/random.img" "$scratch/readback.img"

log "the default: two connections where multi-conn is advertised"
expect_copy "$scratch/random.img" "$uri"
assert_default_connections "$uri"
[[ -z $err ]] || fail "the default said something on stderr: $err"
read_export "$uri" "$scratch/readback2.img"
same_content "$scratch/random.img" "$scratch/readback2.img"
log "--connections 1 keeps one"
expect_copy --connections 1 "$scratch/random.img" "$uri"
assert_eq "connections" "$(stat_field connections)" 1

log "reading over 4 connections"
expect_copy --connections 4 "$uri" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"
assert_eq "connections" "$(stat_field connections)" 4

if command -v qemu-nbd >/dev/null 2>&1; then
  log "qemu-nbd (no multi-conn without --shared): one connection, said once"
  truncate -s 128M "$scratch/qemu.img"
  qemu_nbd_unix q -f raw "$scratch/qemu.img"
  expect_copy --connections 4 "$scratch/random.img" "nbd+unix:///?socket=$scratch/q.sock"
  assert_eq "connections" "$(stat_field connections)" 1
  notes=$(grep -c 'does not advertise multi-conn' <<<"$err" || true)
  assert_eq "notes on stderr" "$notes" 1
  log "qemu-nbd, no option: one connection and no note"
  expect_copy "$scratch/random.img" "nbd+unix:///?socket=$scratch/q.sock"
  assert_eq "connections" "$(stat_field connections)" 1
  [[ -z $err ]] || fail "the default said something on stderr: $err"
  stop_pidfile "$pidfile_of_last"
  same_content "$scratch/random.img" "$scratch/qemu.img"
else
  log "qemu-nbd is not installed: the refusal case is not run"
fi
log "ok"
