#!/bin/bash
# How `sluice copy` stops early into an NBD server: on SIGTERM, or when the source
# fails, it issues nothing more, waits for the replies to the writes in flight (up to a
# grace period, 5 s unless --timeout says otherwise), ends each connection with
# NBD_CMD_DISC, and exits 1 with one message. Cutting the connection with writes in
# flight instead has crashed nbdkit 1.32.5 (an assertion in raw_send_socket).
#
# The destination is nbdkit with every write delayed: its log filter records what it
# was asked and what it answered, its debug output how each connection ended, and the
# server must still be serving afterwards. What it acknowledged must hold the source's
# bytes. A second signal leaves at once; a server that does not answer within the
# grace period is cut off when it runs out.
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy nbdinfo
requires_nbdkit_plugin memory
for f in delay log; do requires_nbdkit_filter $f; done

random_file "$scratch/src.img" 64M

# slow_destination NAME SECONDS: nbdkit on a Unix socket, each write taking SECONDS;
# its log in $scratch/NAME.log, its debug output in $scratch/NAME.err. Sets $uri and
# $dest_pid.
slow_destination() {
  nbdkit_unix "$1" -v --filter=log --filter=delay memory 1G delay-write="$2" \
    logfile="$scratch/$1.log" 2>"$scratch/$1.err"
  dest_pid=$(cat "$pidfile_of_last")
}

# start_copy ARGS...: `sluice copy ARGS...` in the background ($copy_pid); its stderr
# in $scratch/copy.err.
start_copy() {
  "$SLUICE" copy "$@" >"$scratch/copy.out" 2>"$scratch/copy.err" &
  copy_pid=$!
  on_exit "kill -KILL $copy_pid"
}

# writes_asked NAME: the writes nbdkit NAME was asked for so far.
writes_asked() { grep -c ' Write id=' "$scratch/$1.log" 2>/dev/null || true; }

# wait_for_writes NAME N: until nbdkit NAME was asked for N writes (at most 20 s).
wait_for_writes() {
  local i
  for ((i = 0; i < 400; i++)); do
    (($(writes_asked "$1") >= $2)) && return 0
    kill -0 "$copy_pid" 2>/dev/null || fail "the copy ended before $2 writes were asked for: $(cat "$scratch/copy.err")"
    sleep 0.05
  done
  fail "fewer than $2 writes reached the server in 20 s"
}

now() { date +%s.%N; }
# seconds_since T: seconds from T to now, to a tenth.
seconds_since() { "$PYTHON" -c 'import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))' "$1" "$(now)"; }

# wait_for_exit SECONDS WHAT: waits at most SECONDS for the copy to exit; its exit
# status in $status.
wait_for_exit() {
  local i
  for ((i = 0; i < $1 * 20; i++)); do
    kill -0 "$copy_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$copy_pid" 2>/dev/null && fail "the copy was still running $1 s $2"
  status=0
  wait "$copy_pid" || status=$?
}

# one_error MESSAGE: the copy exited 1 with one error line, containing MESSAGE.
one_error() {
  local err
  err=$(cat "$scratch/copy.err")
  assert_eq "exit status ($err)" "$status" 1
  [[ $err == *"$1"* ]] || fail "the error does not say '$1': $err"
  [[ $(grep '^sluice: ' <<<"$err" | grep -vc '^sluice: note:' || true) -eq 1 ]] || fail "not one error line: $err"
}

# ended_cleanly NAME: every write nbdkit NAME was asked for was answered, every one of
# sluice's connections ended with NBD_CMD_DISC, and the server still serves; what it
# acknowledged holds the source's bytes (read back by nbdcopy).
ended_cleanly() {
  local log=$scratch/$1.log connections discs
  connections=$(grep -c ' Connect export=' "$log")
  discs=$(grep -c 'client sent NBD_CMD_DISC' "$scratch/$1.err" || true)
  assert_eq "connections that ended with NBD_CMD_DISC, of the $connections" "$discs" "$connections"
  kill -0 "$dest_pid" 2>/dev/null || fail "nbdkit died: $(tail -3 "$scratch/$1.err")"
  nbdinfo --size "$uri" >/dev/null || fail "nbdkit no longer serves"
  read_export "$uri" "$scratch/$1.back"
  "$PYTHON" - "$log" "$scratch/src.img" "$scratch/$1.back" <<'PY' || fail "the destination does not hold what it acknowledged"
import re, sys
log, src, back = sys.argv[1:]
asked, answered = {}, {}
for line in open(log):
    m = re.search(r'connection=(\d+) Write id=(\d+) offset=(0x[0-9a-f]+) count=(0x[0-9a-f]+)', line)
    if m:
        asked[m.group(1), m.group(2)] = (int(m.group(3), 16), int(m.group(4), 16))
    m = re.search(r'connection=(\d+) \.\.\.Write id=(\d+) return=(\S+)', line)
    if m:
        answered[m.group(1), m.group(2)] = m.group(3)
assert set(answered) == set(asked), "writes never answered: %s" % sorted(set(asked) - set(answered))
assert all(r == "0" for r in answered.values()), "failed writes: %s" % answered
with open(src, "rb") as s, open(back, "rb") as b:
    for offset, count in asked.values():
        s.seek(offset); b.seek(offset)
        assert s.read(count) == b.read(count), "the write at %d does not hold the source's bytes" % offset
print("  %d writes asked for, all answered and in the export" % len(asked))
PY
}

log "SIGTERM with eight writes in flight: they are answered, then NBD_CMD_DISC"
slow_destination term 2
start_copy --depth 8 "$scratch/src.img" "$uri"
wait_for_writes term 8
asked=$(writes_asked term)
signalled=$(now)
kill -TERM "$copy_pid"
sleep 1
kill -0 "$copy_pid" 2>/dev/null || fail "the copy exited at once, without waiting for the writes in flight: $(cat "$scratch/copy.err")"
wait_for_exit 10 "after SIGTERM"
took=$(seconds_since "$signalled")
one_error "the transfer was cancelled"
assert_eq "writes asked for after the signal" "$(writes_asked term)" "$asked"
ended_cleanly term
log "exit 1 ${took} s after SIGTERM, $asked writes answered first, then NBD_CMD_DISC; nbdkit still serves"

log "the source fails (it shrank) with writes in flight: the same clean end"
cp "$scratch/src.img" "$scratch/shrinking.img"
slow_destination shrank 2
start_copy --depth 8 "$scratch/shrinking.img" "$uri"
wait_for_writes shrank 8
truncate -s 4M "$scratch/shrinking.img"
wait_for_exit 20 "after its source shrank"
one_error "source shrank"
ended_cleanly shrank

log "a second signal leaves at once"
slow_destination again 30
start_copy --depth 8 "$scratch/src.img" "$uri"
wait_for_writes again 8
kill -TERM "$copy_pid"
sleep 0.5
kill -0 "$copy_pid" 2>/dev/null || fail "the first SIGTERM did not wait: $(cat "$scratch/copy.err")"
signalled=$(now)
kill -TERM "$copy_pid"
wait_for_exit 2 "after a second SIGTERM"
took=$(seconds_since "$signalled")
assert_eq "exit status after a second SIGTERM" "$status" 1
grep -q "interrupted again: exiting without waiting" "$scratch/copy.err" ||
  fail "a second SIGTERM did not say it left: $(cat "$scratch/copy.err")"
log "the second SIGTERM: exit 1 after ${took} s"

log "a server that does not answer within the grace period (5 s) is cut off"
slow_destination stuck 30
start_copy --depth 8 "$scratch/src.img" "$uri"
wait_for_writes stuck 8
signalled=$(now)
kill -TERM "$copy_pid"
wait_for_exit 15 "after SIGTERM with writes that take 30 s"
took=$(seconds_since "$signalled")
one_error "the transfer was cancelled"
"$PYTHON" -c 'import sys; sys.exit(not 4.5 <= float(sys.argv[1]) <= 12)' "$took" ||
  fail "exited ${took} s after SIGTERM; the grace period is 5 s"
log "cut off ${took} s after SIGTERM"

echo "all passed"
