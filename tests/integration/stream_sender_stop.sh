#!/bin/bash
# A Chunked sender stopped by SIGTERM mid-stream, straight to `sluice serve` and through
# its xen-api HTTP import: the sender lets the chunks it has in flight finish, never
# sends the terminator, and exits 1 saying it was cancelled; the receiver must report
# the stream cut short (exit 1), never success. What it did write is the source's own
# bytes, block by block, or untouched. The source is nbdkit's random plugin behind a
# read delay, so the copy is surely mid-stream when the signal comes.
source "$SOURCE_ROOT/tests/integration/stream_lib.sh"
export PATH=/usr/bin:/usr/sbin:$PATH
for tool in nbdkit nbdcopy nbdinfo; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

SIZE=$((256 << 20))
nbdkit -U "$WORK/src.sock" -P "$WORK/src.pid" --filter=delay random $SIZE seed=45 rdelay=100ms ||
  { echo "FAIL: nbdkit did not start"; exit 1; }
for _ in $(seq 100); do [ -s "$WORK/src.pid" ] && break; sleep 0.05; done
SOURCE_PID=$(cat "$WORK/src.pid")
SERVER_PIDS+=("$SOURCE_PID")
SOURCE="nbd+unix:///?socket=$WORK/src.sock"
nbdcopy "$SOURCE" src.img || { echo "FAIL: nbdcopy could not read the source"; exit 1; }

# holds_only_source OUTPUT: every 64 KiB block of OUTPUT is the source's or zeros, and
# some are the source's.
holds_only_source() {
  $PY - src.img "$1" <<'PYEOF'
import sys
block = 64 * 1024
zero = bytes(block)
written = 0
with open(sys.argv[1], "rb") as s, open(sys.argv[2], "rb") as o:
    offset = 0
    while True:
        want, got = s.read(block), o.read(block)
        if not want:
            break
        if got != zero:
            assert got == want, "the block at %d is neither the source's nor untouched" % offset
            written += 1
        offset += block
assert written > 0, "nothing was written before the signal"
assert written < offset // block, "everything was written: the signal came too late"
print("  %d of %d blocks written, each the source's" % (written, offset // block))
PYEOF
}

run_case() {  # run_case NAME DESTINATION SERVE-OPTIONS...
  local name=$1 dest=$2 port=$3 copy_pid status i
  shift 3
  rm -f out.img
  start_serve serve.log --listen tcp://127.0.0.1:$port --protocol chunked "$@" --output out.img --size $SIZE --once ||
    { fail "$name: serve did not start: $(cat serve.log)"; return; }
  "$SLUICE" copy "$SOURCE" "$dest" >copy.out 2>copy.log &
  copy_pid=$!
  for i in $(seq 200); do
    [ "$(stat -c %b out.img 2>/dev/null || echo 0)" -gt $((8 << 11)) ] && break  # 8 MiB in 512-byte blocks
    sleep 0.05
  done
  kill -TERM $copy_pid 2>/dev/null || { fail "$name: the copy ended before the signal: $(cat copy.log)"; return; }
  status=0
  wait $copy_pid || status=$?
  [ $status -eq 1 ] || fail "$name: the sender exited $status after SIGTERM: $(cat copy.log)"
  grep -q "the transfer was cancelled" copy.log || fail "$name: the sender did not say it was cancelled: $(cat copy.log)"
  for i in $(seq 200); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$SERVE_PID" 2>/dev/null; then
    fail "$name: the receiver was still running 10 s after the sender stopped: $(cat serve.log)"
    return
  fi
  status=0
  wait "$SERVE_PID" || status=$?
  # The source too was left cleanly, its reads in flight answered: cutting nbdkit
  # 1.32.5 off with requests in flight has crashed it, a moment later.
  sleep 0.5
  nbdinfo --size "$SOURCE" >/dev/null 2>&1 || { fail "$name: the source nbdkit no longer serves"; return; }
  if [ $status -eq 0 ]; then
    fail "$name: the receiver reported success for a stream cut short: $(cat serve.log)"
  elif [ $status -ne 1 ]; then
    fail "$name: the receiver exited $status: $(cat serve.log)"
  elif ! grep -q "terminator" serve.log; then
    fail "$name: the receiver did not say the terminator is missing: $(cat serve.log)"
  elif holds_only_source out.img; then
    pass "$name: sender and receiver exit 1, no terminator; what landed is the source's"
  else
    fail "$name: the output holds bytes the source does not"
  fi
}

port=$(free_port)
run_case chunked "tcp://127.0.0.1:$port" "$port"
port=$(free_port)
run_case http "http://127.0.0.1:$port/import_raw_vdi?vdi=x" "$port" --http
finish
