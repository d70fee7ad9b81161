#!/bin/bash
# How `sluice copy` takes SIGINT and SIGTERM:
#  - the first cancels: the requests in flight are waited for, then exit 1;
#  - a second one leaves at once, saying so, exit 1;
#  - one that lands as the copy finishes never turns the outcome into a death by
#    signal: exit 0 with the copy complete, or exit 1 "cancelled". (A signal before
#    the program has started can only kill it, which is harmless: nothing was opened.)
# A cancel that has to wait is made with a frozen filesystem (fsfreeze): writes to it
# block in the kernel until it thaws. The kernel also holds the exiting process until
# those writes are done, so "at once" is what the program does (it says so and exits);
# the process is reaped after the thaw.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit fsfreeze losetup
requires_root "mounting and freezing a filesystem"

M=$((1024 * 1024))

# --- a signal as the copy finishes --------------------------------------------------
# The signal is sent 0 to 60 ms after the copy starts, which spans its whole run here
# (a 16 MiB copy takes 10-30 ms), so some rounds cancel it, some land after it.
random_file "$scratch/small.img" 16M
rounds=${ROUNDS:-40}
late=0 early=0
for round in $(seq 1 "$rounds"); do
  rm -f "$scratch/small.copy"
  status=0
  "$PYTHON" - "$SLUICE" "$scratch/small.img" "$scratch/small.copy" $((round * 1500)) \
    >"$scratch/race.out" 2>"$scratch/race.err" <<'PY' || status=$?
import os, signal, subprocess, sys, time
sluice, src, dst, delay = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) / 1e6
child = subprocess.Popen([sluice, "copy", src, dst])
until = time.perf_counter() + delay
while time.perf_counter() < until:
    pass  # a busy wait: sleeping would overshoot
try:
    child.send_signal(signal.SIGINT)
except ProcessLookupError:
    pass
status = child.wait()
sys.exit(128 - status if status < 0 else status)  # death by signal N reads as 128+N
PY
  case $status in
    0)
      cmp -s "$scratch/small.img" "$scratch/small.copy" || fail "round $round: exit 0 but the copy differs"
      late=$((late + 1))
      ;;
    1) grep -q "the transfer was cancelled" "$scratch/race.err" ||
      fail "round $round: exit 1 without saying it was cancelled: $(cat "$scratch/race.err")" ;;
    130) # killed before it could take signals: while loading, before it opened anything
      [[ -e $scratch/small.copy ]] &&
        fail "round $round: killed by the SIGINT $((round * 1500)) us in, after the destination was made"
      early=$((early + 1))
      ;;
    *) fail "round $round: exit status $status after a SIGINT $((round * 1500)) us in: $(cat "$scratch/race.err")" ;;
  esac
done
log "$rounds copies signalled: $early killed while loading, $late finished first and were complete, the rest were cancelled"
[[ $late -gt 0 ]] || log "note: no signal landed after a copy had finished (a slow machine)"

# --- the first signal waits, a second leaves ----------------------------------------
truncate -s 2G "$scratch/fs.img"
mkfs.ext4 -q "$scratch/fs.img"
mkdir "$scratch/mnt"
mount -o loop "$scratch/fs.img" "$scratch/mnt" 2>"$scratch/mount.err" ||
  skip "cannot mount a loop device: $(cat "$scratch/mount.err")"
# Lazily: a copy killed by a failed check may hold the file open for a moment more.
on_exit "umount -l '$scratch/mnt'"
# Registered last, so run first: a filesystem left frozen would hang whatever touches it.
on_exit "fsfreeze --unfreeze '$scratch/mnt'"

# A paced source (200 ms per read), so the copy is still running when the freeze comes.
nbdkit_unix source --filter=delay random 1G rdelay=200ms

dst=$scratch/mnt/copy.img
"$SLUICE" copy "$uri" "$dst" >"$scratch/copy.out" 2>"$scratch/copy.err" &
copy_pid=$!
on_exit "kill -KILL $copy_pid"
for _ in $(seq 1 100); do
  [[ -f $dst ]] && (($(allocated_bytes "$dst") >= 8 * M)) && break
  sleep 0.1
done
(($(allocated_bytes "$dst") >= 8 * M)) || fail "the copy wrote nothing in 10 s: $(cat "$scratch/copy.err")"
fsfreeze --freeze "$scratch/mnt"
sleep 0.5  # the writes in flight now wait for the thaw

kill -INT "$copy_pid"
sleep 1
kill -0 "$copy_pid" 2>/dev/null || fail "the first SIGINT did not wait for the writes in flight: $(cat "$scratch/copy.err")"
grep -q "cancelled" "$scratch/copy.err" && fail "said 'cancelled' while writes were still in flight"

kill -INT "$copy_pid"
for _ in $(seq 1 20); do
  grep -q "interrupted again" "$scratch/copy.err" && break
  sleep 0.1
done
grep -q "interrupted again: exiting without waiting" "$scratch/copy.err" ||
  fail "a second SIGINT did not make it leave: $(cat "$scratch/copy.err")"
fsfreeze --unfreeze "$scratch/mnt"
status=0
wait "$copy_pid" || status=$?
assert_eq "exit status after a second SIGINT" 1 "$status"
log "the first SIGINT waited for the frozen writes, the second left at once"
echo "all passed"
