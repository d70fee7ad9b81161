#!/bin/bash
# qemu-nbd as the server: raw files over TCP and a Unix socket, sparse both ways (its
# map reports holes), a qcow2 image as the source, an unknown export (GO's refusal
# names it), and a read-only export.
. "$(dirname "$0")/nbd-functions.sh"
requires qemu-nbd qemu-img qemu-io

sparse_image "$scratch/sparse.img" 512M 0 1M 64M 5M 511M 1M

log "file -> qemu-nbd (TCP, raw) -> file"
truncate -s 512M "$scratch/target.img"
qemu_nbd_tcp q1 -f raw -x disk "$scratch/target.img"
expect_copy "$scratch/sparse.img" "nbd://127.0.0.1:$port/disk"
expect_copy "nbd://127.0.0.1:$port/disk" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
assert_eq "bytes read (only the data)" "$(stat_field bytes_read)" $((7 << 20))

log "an unknown export is refused by name"
expect_failure "unknown export" copy "$scratch/sparse.img" "nbd://127.0.0.1:$port/nosuch"
[[ $err == *"'nosuch'"* ]] || fail "the export is not named: $err"
stop_pidfile "$pidfile_of_last"
same_content "$scratch/sparse.img" "$scratch/target.img"

log "Unix socket, default export name"
truncate -s 512M "$scratch/target2.img"
qemu_nbd_unix q2 -f raw "$scratch/target2.img"
expect_copy "$scratch/sparse.img" "nbd+unix:///?socket=$scratch/q2.sock"
stop_pidfile "$pidfile_of_last"
same_content "$scratch/sparse.img" "$scratch/target2.img"

log "qcow2 source with data, zero clusters and unallocated space"
qemu-img create -q -f qcow2 "$scratch/src.qcow2" 64M
qemu-io -f qcow2 -c "write -P 0x5a 0 1M" -c "write -z 8M 2M" -c "write -P 0xa5 60M 4M" "$scratch/src.qcow2" >/dev/null
qemu-img convert -O raw "$scratch/src.qcow2" "$scratch/expected.img"
qemu_nbd_unix q3 -f qcow2 -r "$scratch/src.qcow2"
expect_copy "nbd+unix:///?socket=$scratch/q3.sock" "$scratch/fromqcow.img"
same_content "$scratch/expected.img" "$scratch/fromqcow.img"
assert_eq "bytes read (only the data)" "$(stat_field bytes_read)" $((5 << 20))

log "a read-only qemu-nbd export is refused"
expect_failure "is read-only" copy "$scratch/sparse.img" "nbd+unix:///?socket=$scratch/q3.sock"
log "ok"
