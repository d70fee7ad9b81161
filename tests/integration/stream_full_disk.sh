#!/bin/bash
# A full disk on the receiving side: `sluice serve` writes into a small tmpfs, the
# image does not fit; serve must fail with "No space left on device" and exit 1,
# never claim success, and keep what it wrote; and the sender, which gets no reply in
# these protocols, must fail too (the receiver resets the connection rather than
# closing it). Needs root for the tmpfs (77 = skip).
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to mount a tmpfs"; exit 77; }
mkdir small
mount -t tmpfs -o size=4m sluice-test small || { echo "cannot mount a tmpfs"; exit 77; }
trap 'umount "$WORK/small" 2>/dev/null; cleanup' EXIT

make_image big.img $((16 * 1024 * 1024))
for case in "chunked tcp" "raw tcp" "chunked unix" "chunked tcp --no-zero-copy"; do
  set -- $case
  protocol=$1 transport=$2
  shift 2
  rm -f small/out.img
  if [ "$transport" = tcp ]; then
    port=$(free_port)
    listen=tcp://127.0.0.1:$port
  else
    listen=unix://$WORK/full.sock
  fi
  start_serve serve.log --listen "$listen" --protocol $protocol --output small/out.img \
    --size 16M --once "$@" || exit 1
  copy_status=0
  "$SLUICE" copy --protocol $protocol big.img "$listen" >/dev/null 2>copy.log || copy_status=$?
  [ $copy_status -eq 1 ] || fail "$case: the sender exited $copy_status after the receiver failed: $(cat copy.log)"
  wait "$SERVE_PID"
  status=$?
  if [ $status -eq 1 ] && grep -q "No space left on device" serve.log && ! grep -q "(flushed)" serve.log; then
    pass "$case: full disk: $(grep '^sluice:' serve.log | head -1); the sender: $(head -1 copy.log)"
  else
    fail "$case: full disk: exit $status, $(cat serve.log)"
  fi
  # The first megabyte did fit and stays.
  cmp -n 1048576 big.img small/out.img || fail "$case: data written before the disk filled was lost"
done
finish
