#!/bin/bash
# What clients see before moving data: export list, sizes, names, descriptions, block
# sizes, the allocation map and the advertised features, over Unix and TCP sockets.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdinfo python3

# 8 MiB with data only in [1 MiB, 2 MiB) and [6 MiB, 6 MiB + 64 KiB).
truncate -s 8M "$WORK/disk.img"
head -c 1M /dev/urandom | dd of="$WORK/disk.img" bs=1M seek=1 conv=notrunc status=none
head -c 64K /dev/urandom | dd of="$WORK/disk.img" bs=64K seek=96 conv=notrunc status=none
truncate -s 3M "$WORK/second.img"

SOCK="$WORK/nbd.sock"
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --export second="$WORK/second.img"
U="nbd+unix:///disk?socket=$SOCK"

list=$(nbdinfo --list "nbd+unix:///?socket=$SOCK")
grep -q 'export="disk":' <<<"$list" || die "--list lacks disk: $list"
grep -q 'export="second":' <<<"$list" || die "--list lacks second: $list"
grep -q 'description: disk.img (raw image file)' <<<"$list" || die "--list lacks the description: $list"
[ "$(grep -c 'export=' <<<"$list")" -eq 2 ] || die "--list shows exports that were not configured"
pass "nbdinfo --list shows exactly the configured exports"

info=$(nbdinfo "$U")
for line in 'export-size: 8388608' 'block_size_minimum: 1' 'block_size_preferred: 4096' \
            'block_size_maximum: 33554432' 'description: disk.img (raw image file)' 'is_read_only: false' \
            'base:allocation' 'using structured packets'; do
  grep -qF "$line" <<<"$info" || die "nbdinfo lacks '$line': $info"
done
[ "$(nbdinfo --size "nbd+unix:///second?socket=$SOCK")" = 3145728 ] || die "second export has the wrong size"
pass "nbdinfo: size, description, block sizes, structured replies, base:allocation"

# The default export (empty name) is the first configured one.
[ "$(nbdinfo --size "nbd+unix:///?socket=$SOCK")" = 8388608 ] || die "the default export is not the first one"
# A name is never a path, and unknown names are refused.
if nbdinfo "nbd+unix:///$WORK/disk.img?socket=$SOCK" >/dev/null 2>&1; then die "a path was accepted as an export name"; fi
if nbdinfo "nbd+unix:///nope?socket=$SOCK" >/dev/null 2>&1; then die "an unknown export was accepted"; fi
pass "default export, unknown names and paths refused"

map=$(nbdinfo --map "$U" | awk '{print $1, $2, $3}')
expected=$'0 1048576 3\n1048576 1048576 0\n2097152 4194304 3\n6291456 65536 0\n6356992 2031616 3'
[ "$map" = "$expected" ] || die "nbdinfo --map is"$'\n'"$map"$'\n'"expected"$'\n'"$expected"
pass "nbdinfo --map follows the file's holes and data"

for feature in multi-conn zero fast-zero df structured-reply trim flush fua cache; do
  nbdinfo --can "$feature" "$U" || die "--can $feature is false"
done
pass "nbdinfo --can multi-conn zero fast-zero df structured-reply trim flush fua cache"
stop_server

# TCP, read-only: no writes, no trim, no zeroing advertised.
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" --read-only
T="nbd://127.0.0.1:$PORT/disk"
nbdinfo --is read-only "$T" || die "a --read-only export is not read-only"
for feature in trim zero fast-zero; do
  if nbdinfo --can "$feature" "$T"; then die "read-only export advertises $feature"; fi
done
nbdinfo --can multi-conn "$T" || die "read-only export lacks multi-conn"
grep -qF 'disk.img (raw image file, read-only)' <<<"$(nbdinfo "$T")" || die "read-only description"
[ "$(nbdinfo --map "$T" | wc -l)" -eq 5 ] || die "--map over TCP"
pass "TCP, --read-only: READ_ONLY set, write features not advertised"
stop_server

# O_DIRECT: the minimum block size becomes 4096 (on filesystems that allow O_DIRECT).
if python3 -c "import os,sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT))" "$WORK/disk.img" 2>/dev/null; then
  start_server "unix://$SOCK" --export disk="$WORK/disk.img" --direct
  grep -qF 'block_size_minimum: 4096' <<<"$(nbdinfo "$U")" || die "--direct does not advertise a 4096 minimum"
  pass "--direct advertises block_size_minimum 4096"
  stop_server
fi
echo "all passed"
