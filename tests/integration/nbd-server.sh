#!/bin/bash
# nbd-server (the reference server): simple replies only, so no allocation map: the
# source reads every byte. Configured with a config file on a free port.
. "$(dirname "$0")/nbd-functions.sh"
requires nbd-server nbdinfo

sparse_image "$scratch/sparse.img" 256M 0 1M 100M 3M 255M 1M
truncate -s 256M "$scratch/export.img"
cp "$scratch/sparse.img" "$scratch/readonly.img"
port=$(free_port)
cat >"$scratch/nbd-server.conf" <<CONF
[generic]
    port = $port
    listenaddr = 127.0.0.1
    allowlist = true
[disk]
    exportname = $scratch/export.img
[ro]
    exportname = $scratch/readonly.img
    readonly = true
CONF
nbd-server -C "$scratch/nbd-server.conf" -p "$scratch/nbd-server.pid" 2>"$scratch/nbd-server.log" ||
  fail "nbd-server did not start: $(cat "$scratch/nbd-server.log")"
on_exit "stop_pidfile '$scratch/nbd-server.pid'"
for ((i = 0; i < 100; i++)); do
  nbdinfo --size "nbd://127.0.0.1:$port/disk" >/dev/null 2>&1 && break
  sleep 0.1
done

log "file -> nbd-server -> file"
expect_copy "$scratch/sparse.img" "nbd://127.0.0.1:$port/disk"
same_content "$scratch/sparse.img" "$scratch/export.img"
expect_copy "nbd://127.0.0.1:$port/disk" "$scratch/back.img"
same_content "$scratch/sparse.img" "$scratch/back.img"
assert_eq "bytes read (no map without structured replies)" "$(stat_field bytes_read)" $((256 << 20))

log "a read-only export is refused; an unknown one is named"
expect_failure "is read-only" copy "$scratch/sparse.img" "nbd://127.0.0.1:$port/ro"
expect_failure "unknown export" copy "$scratch/sparse.img" "nbd://127.0.0.1:$port/nosuch"
log "ok"
