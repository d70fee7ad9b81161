#!/bin/bash
# Data through real clients, verified every time: nbdcopy both ways against nbdkit's
# self-checking sparse-random plugin, qemu-img convert and compare, and qemu-io reads,
# writes, zeroes (allocating and not) and discards, over Unix and TCP sockets.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdcopy nbdkit qemu-img qemu-io nbdinfo python3

SIZE=256M
truncate -s "$SIZE" "$WORK/disk.img"
SOCK="$WORK/nbd.sock"
PORT=$(free_port)
start_server "unix://$SOCK" --export disk="$WORK/disk.img"
U="nbd+unix:///disk?socket=$SOCK"

# sparse-random generates the same image for the same seed and fails any write that
# differs from it: copy in, then copy back out into a second instance.
nbdkit -U - sparse-random "$SIZE" seed=4242 --run "nbdcopy \"\$uri\" '$U'" || die "nbdcopy sparse-random -> sluice"
nbdkit -U - sparse-random "$SIZE" seed=4242 --run "nbdcopy '$U' \"\$uri\"" || die "nbdcopy sluice -> sparse-random"
# The check can fail: a different seed is a different image.
if nbdkit -U - sparse-random "$SIZE" seed=4243 --run "nbdcopy '$U' \"\$uri\"" 2>/dev/null; then
  die "sparse-random accepted the wrong image (the verification does not verify)"
fi
pass "nbdcopy both ways (multi-conn) with nbdkit sparse-random verifying, Unix socket"

# The same data must be in the file, with the holes kept holes.
nbdkit -U - sparse-random "$SIZE" seed=4242 --run "nbdcopy \"\$uri\" '$WORK/expected.img'"
cmp "$WORK/disk.img" "$WORK/expected.img" || die "the file differs from what was copied in"
[ "$(stat -c %b "$WORK/disk.img")" -lt $(( 256 * 1024 * 2 / 2 )) ] || die "holes were filled in"
pass "the exported file holds the copied image, sparse"
stop_server

# TCP, nbdcopy with synchronous requests and with many in flight, then qemu-img.
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img"
T="nbd://127.0.0.1:$PORT/disk"
head -c 64M /dev/urandom >"$WORK/random.img"
truncate -s "$SIZE" "$WORK/random.img"
nbdcopy --requests=64 --connections=1 "$WORK/random.img" "$T" || die "nbdcopy file -> sluice over TCP"
nbdcopy --synchronous "$T" "$WORK/back.img" || die "nbdcopy sluice -> file over TCP"
cmp "$WORK/random.img" "$WORK/back.img" || die "nbdcopy round trip differs"
cmp "$WORK/random.img" "$WORK/disk.img" || die "the export's file differs after nbdcopy"
pass "nbdcopy file -> sluice -> file over TCP, identical"

head -c 32M /dev/urandom >"$WORK/qsrc.img"
truncate -s "$SIZE" "$WORK/qsrc.img"
qemu-img convert -n -f raw -O raw "$WORK/qsrc.img" "$T" || die "qemu-img convert into sluice"
qemu-img compare -f raw -F raw "$WORK/qsrc.img" "$T" || die "qemu-img compare after convert"
qemu-img convert -f raw -O raw "$T" "$WORK/qback.img" || die "qemu-img convert out of sluice"
cmp "$WORK/qsrc.img" "$WORK/qback.img" || die "qemu-img round trip differs"
pass "qemu-img convert both ways and qemu-img compare"

# qemu-io: every data command, then the file itself is checked.
python3 -c "
import os
with open('$WORK/disk.img', 'r+b') as f:
    f.write(os.urandom(8 << 20))  # allocate the first 8 MiB
"
blocks_before=$(stat -c %b "$WORK/disk.img")
qemu-io -f raw \
  -c 'write -P 0xab 1M 64k' -c 'read -P 0xab 1M 64k' \
  -c 'write -P 0x5a 3000 5000' -c 'read -P 0x5a 3000 5000' \
  -c 'write -z 2M 1M' -c 'read -P 0 2M 1M' \
  -c 'write -z -u 4M 1M' -c 'read -P 0 4M 1M' \
  -c 'discard 6M 1M' \
  -c 'write -P 0x11 -f 7M 4k' -c 'flush' -c 'read -P 0x11 7M 4k' \
  "$T" >"$WORK/qemu-io.log" || { cat "$WORK/qemu-io.log"; die "qemu-io commands failed"; }
if grep -q 'Pattern verification failed' "$WORK/qemu-io.log"; then cat "$WORK/qemu-io.log"; die "qemu-io read back wrong data"; fi
python3 - "$WORK/disk.img" <<'PY' || die "the file does not hold what qemu-io wrote"
import sys
data = open(sys.argv[1], 'rb').read(8 << 20)
M = 1 << 20
assert data[M:M + 65536] == b'\xab' * 65536, 'write -P'
assert data[3000:8000] == b'\x5a' * 5000, 'unaligned write'
assert data[2 * M:3 * M] == bytes(M), 'write -z'
assert data[4 * M:5 * M] == bytes(M), 'write -z -u'
assert data[7 * M:7 * M + 4096] == b'\x11' * 4096, 'FUA write'
PY
blocks_after=$(stat -c %b "$WORK/disk.img")
# write -z -u (may unmap) and discard each free 1 MiB; write -z (NO_HOLE) frees nothing.
freed=$(( (blocks_before - blocks_after) * 512 ))
# (Splitting extents may cost the filesystem a block or two of metadata.)
[ "$freed" -gt $(( (2 << 20) - (64 << 10) )) ] && [ "$freed" -le $(( 2 << 20 )) ] ||
  die "expected 2 MiB deallocated by write -z -u and discard, got $freed bytes"
pass "qemu-io write, unaligned write, write -z, write -z -u, discard, FUA write, flush"
stop_server
echo "all passed"
