#!/bin/bash
# A full disk on the receiving side: `sluice serve` writes into a small tmpfs, the
# image does not fit; serve must fail with "No space left on device" and exit 1,
# never claim success, and keep what it wrote. Needs root for the tmpfs (77 = skip).
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to mount a tmpfs"; exit 77; }
mkdir small
mount -t tmpfs -o size=4m sluice-test small || { echo "cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/small" 2>/dev/null; cleanup' EXIT

make_image big.img $((16 * 1024 * 1024))
for protocol in chunked raw; do
  rm -f small/out.img
  port=$(free_port)
  start_serve serve.log --listen tcp://127.0.0.1:$port --protocol $protocol --output small/out.img \
    --size 16M --once || exit 1
  "$SLUICE" copy --protocol $protocol big.img tcp://127.0.0.1:$port >/dev/null 2>copy.log
  wait "$SERVE_PID"
  status=$?
  if [ $status -eq 1 ] && grep -q "No space left on device" serve.log && ! grep -q "(flushed)" serve.log; then
    pass "$protocol: full disk: $(grep '^sluice:' serve.log | head -1)"
  else
    fail "$protocol: full disk: exit $status, $(cat serve.log)"
  fi
  # The first megabyte did fit and stays.
  cmp -n 1048576 big.img small/out.img || fail "$protocol: data written before the disk filled was lost"
done
finish
