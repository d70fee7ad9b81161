#!/bin/bash
# serve --threads N: connections are spread over N event loops (one per thread, each
# with its own open exports); data written over several connections on several loops
# is all there, reads and writes interleave across loops, a block device can be served
# by several loops, and SIGTERM winds every loop down with exit 0.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdkit nbdsh python3

SIZE=256M
SOCK="$WORK/nbd.sock"
U="nbd+unix:///disk?socket=$SOCK"

# loop_threads PID: the CPU time (ns) of each of its sluice-loop* threads, one per line;
# from schedstat, or in clock ticks from stat where the kernel has no schedstat.
ns_per_tick=$((1000000000 / $(getconf CLK_TCK)))
loop_threads() {
  local t
  for t in /proc/"$1"/task/*; do
    case $(cat "$t/comm" 2>/dev/null) in
      sluice-loop*)
        if [ -r "$t/schedstat" ]; then
          awk '{print $1}' "$t/schedstat"
        else
          awk -v ns="$ns_per_tick" '{print ($14 + $15) * ns}' "$t/stat"
        fi ;;
    esac
  done
}

truncate -s "$SIZE" "$WORK/disk.img"
start_server "unix://$SOCK" --threads 3 --export disk="$WORK/disk.img"
# The socket appears at bind; the loop threads start and name themselves just after.
for i in $(seq 100); do
  threads=$(loop_threads "$SERVER_PID" | wc -l)
  [ "$threads" -ge 2 ] && break
  sleep 0.1
done
[ "$threads" -eq 2 ] || die "--threads 3 should run two loop threads beside the main one, found $threads"
idle=$(loop_threads "$SERVER_PID" | awk "{s += \$1} END {print s + 0}")

# nbdkit sparse-random checks every byte it is sent back, so a copy out of the server
# into a second sparse-random export with the same seed verifies the data.
nbdkit -U - sparse-random "$SIZE" seed=7 percent=50 --run "nbdcopy --connections=4 \"\$uri\" '$U'" \
  || die "writing over 4 connections failed"
# An idle loop sleeps in the kernel; serving a connection (tens of MiB here) takes milliseconds.
busy=$(loop_threads "$SERVER_PID" | awk "{s += \$1} END {print s + 0}")
[ $((busy - idle)) -gt 2000000 ] || die "no connection was served on a loop thread (all on the main loop)"
nbdkit -U - sparse-random "$SIZE" seed=7 percent=50 --run "nbdcopy --connections=4 '$U' \"\$uri\"" \
  || die "the data read back over 4 connections is not what was written"
pass "--threads 3: 4 connections written and read back, the loop threads busy for $(((busy - idle) / 1000000)) ms, data verified"

# A write on one connection is visible to a read on another at once, whichever loops
# serve them (each loop has its own descriptor for the file; the page cache is shared).
nbdsh -u "$U" -c "
import nbd
others = []
for i in range(3):
    o = nbd.NBD()
    o.connect_uri('$U')
    others.append(o)
for i, o in enumerate([h] + others):
    block = bytes([i + 1]) * 65536
    o.pwrite(block, i * 65536)
    o.flush()
    for reader in [h] + others:
        assert reader.pread(65536, i * 65536) == block, (i, 'not visible on another connection')
for o in others:
    o.shutdown()
" || die "writes on one connection were not visible on the others"
pass "writes on one loop are read back on the others"

stop_server

start_server "unix://$SOCK" --threads 1 --export disk="$WORK/disk.img"
threads=$(loop_threads "$SERVER_PID" | wc -l)
[ "$threads" -eq 0 ] || die "--threads 1 should serve on the main loop only, found $threads loop threads"
nbdkit -U - sparse-random "$SIZE" seed=9 --run "nbdcopy --connections=2 \"\$uri\" '$U'" || die "copy with --threads 1"
nbdkit -U - sparse-random "$SIZE" seed=9 --run "nbdcopy --connections=2 '$U' \"\$uri\"" \
  || die "the data read back with --threads 1 is wrong"
stop_server
pass "--threads 1: one loop, data verified"

# A block device, opened once per loop: no loop may hold it exclusively.
if [ "$(id -u)" -eq 0 ] && command -v losetup >/dev/null &&
  device=$(losetup --find --show "$WORK/disk.img" 2>/dev/null); then
  # The server is stopped first (cleanup kills it), then the device detached.
  trap 'cleanup; losetup -d "$device" 2>/dev/null || true' EXIT
  start_server "unix://$SOCK" --threads 2 --export disk="$device"
  nbdkit -U - sparse-random "$SIZE" seed=11 --run "nbdcopy --connections=4 \"\$uri\" '$U'" \
    || die "writing to a block device export over 4 connections failed"
  nbdkit -U - sparse-random "$SIZE" seed=11 --run "nbdcopy --connections=4 '$U' \"\$uri\"" \
    || die "the block device export read back wrong"
  stop_server
  pass "--threads 2 on a block device ($device): 4 connections written and read back, data verified"
else
  echo "SKIP (this case only): no loop device (needs root and losetup)"
fi

status=0
"$SLUICE" serve --protocol nbd --listen "unix://$SOCK" --threads 0 --export disk="$WORK/disk.img" \
  2>"$WORK/usage.err" || status=$?
[ "$status" -eq 2 ] || die "--threads 0 exited $status, not 2"
grep -q -- '--threads must be between 1 and 64' "$WORK/usage.err" || die "no clear message for --threads 0"
status=0
"$SLUICE" serve --listen "unix://$SOCK" --threads 2 --output "$WORK/disk.img" 2>"$WORK/usage.err" || status=$?
[ "$status" -eq 2 ] || die "--threads 2 with chunked exited $status, not 2"
grep -q -- '--threads is for --protocol nbd' "$WORK/usage.err" || die "no clear message for --threads with chunked"
pass "bad --threads values are usage errors"
