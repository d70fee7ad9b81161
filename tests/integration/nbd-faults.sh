#!/bin/bash
# Faults end the copy with exit 1 and one clear error naming the operation and the
# offset, after every request in flight is accounted for; never success, never a hang
# (every sluice run is under a watchdog):
#  - nbdkit's error filter at 100% and at 1%, on writes and on reads, with structured
#    and with simple replies;
#  - a FLUSH that fails after every write succeeded (exit 1, never 100%);
#  - the server killed in the middle of a copy (writing and reading);
#  - a server that stops answering (--timeout), and one that never finishes the
#    handshake;
#  - exports refused before any data moves: read-only, smaller than the source.
# (Unknown exports: nbd-qemu.sh, nbd-server.sh; TLS refusals: nbd-tls.sh.)
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit
requires_nbdkit_plugin memory
requires_nbdkit_plugin random
requires_nbdkit_plugin eval
for f in error delay log; do requires_nbdkit_filter $f; done

random_file "$scratch/random.img" 64M

log "write errors, 100%"
nbdkit_unix werr100 --filter=error memory 64M error=EIO error-pwrite-rate=100%
expect_failure "failed: the server" copy "$scratch/random.img" "$uri"
[[ $err == *"NBD WRITE of "*" bytes at offset "*"EIO (Input/output error)"* ]] || fail "unclear message: $err"

log "write errors, 1% (4 KiB requests: thousands of chances)"
nbdkit_unix werr1 --filter=error memory 64M error=ENOSPC error-pwrite-rate=1%
expect_failure "NBD WRITE of 4096 bytes at offset " copy --request-size 4k "$scratch/random.img" "$uri"
[[ $err == *ENOSPC* ]] || fail "the server's error is not named: $err"

log "read errors, 100% and 1%, structured replies"
nbdkit_unix rerr100 --filter=error random 64M error=EIO error-pread-rate=100%
expect_failure "READ of " copy "$uri" "$scratch/out.img"
[[ $err == *" at offset "*"EIO"* ]] || fail "unclear message: $err"
nbdkit_unix rerr1 --filter=error random 64M error=EIO error-pread-rate=1%
expect_failure "READ of 4096 bytes at offset " copy --request-size 4k "$uri" null:

log "read errors with simple replies (--no-sr)"
nbdkit_unix rerrsimple --no-sr --filter=error random 64M error=EIO error-pread-rate=1%
expect_failure "NBD READ of 4096 bytes at offset " copy --request-size 4k "$uri" null:
[[ $err == *"answered EIO"* ]] || fail "unclear message: $err"

log "a failed FLUSH: every byte was written, but the copy is not durable and must not say it is"
# nbdkit's error filter cannot fail a flush; eval can. Writes land, the flush fails.
nbdkit_unix flushfail eval get_size='echo 64M' pread='dd if=/dev/zero count=$3 iflag=count_bytes status=none' \
  pwrite='cat >/dev/null' can_write='exit 0' can_flush='exit 0' can_multi_conn='exit 0' \
  flush='echo "EIO the write cache was lost" >&2; exit 1'
expect_failure "FLUSH" copy --progress=json "$scratch/random.img" "$uri"
[[ $err == *EIO* ]] || fail "the server's error is not named: $err"
[[ $err != *'"percent":100'* ]] || fail "progress said 100% of a copy whose flush failed: $err"
expect_copy --no-flush "$scratch/random.img" "$uri"  # the same export, asked for no flush

log "the server killed while we write"
random_file "$scratch/big.img" 512M
nbdkit_tcp victim --filter=log --filter=delay memory 1G wdelay=100ms logfile="$scratch/victim.log"
kill_when_busy "$scratch/victim.log" Write "$(cat "$pidfile_of_last")" &
expect_failure "NBD WRITE of " copy "$scratch/big.img" "$uri"
wait
[[ $err == *"at offset "*"broke"* ]] || fail "unclear message: $err"

log "the server killed while we read"
nbdkit_tcp victim2 --filter=log --filter=delay random 1G rdelay=100ms logfile="$scratch/victim2.log"
kill_when_busy "$scratch/victim2.log" Read "$(cat "$pidfile_of_last")" &
expect_failure "NBD READ of " copy "$uri" null:
wait

log "--timeout: a server that stops answering"
nbdkit_unix stalled --filter=delay memory 64M wdelay=1000
start=$SECONDS
expect_failure "no reply from " copy --timeout 2 "$scratch/random.img" "$uri"
(( SECONDS - start < 30 )) || fail "--timeout 2 took $((SECONDS - start)) s"
[[ $err == *"NBD WRITE of "*" at offset "* ]] || fail "the timeout does not name the request: $err"

log "--timeout: a slow link that keeps moving is not a dead server"
# One 2 MiB request at 400 KB/s takes about 5 s to cross, over a --timeout of 2 s:
# every piece that moves counts as progress, both ways.
head -c 2M /dev/urandom >"$scratch/slow.img"
nbdkit_unix slowdst memory 2M
slowdst_sock=$scratch/slowdst.sock
slow_link() { # slow_link NAME SERVER_SOCKET: a relay for one connection; sets $slow_uri
  rm -f "$scratch/$1.ready"
  "$PYTHON" "$(dirname "$0")/slow_link.py" "$scratch/$1.sock" "$2" 400000 "$scratch/$1.ready" &
  on_exit "kill $! 2>/dev/null"
  wait_for_file "$scratch/$1.ready" || fail "the slow link did not start"
  slow_uri="nbd+unix:///?socket=$scratch/$1.sock"
}
slow_link slowup "$slowdst_sock"
expect_copy --timeout 2 --connections 1 --depth 1 --request-size 2M "$scratch/slow.img" "$slow_uri"
read_export "$uri" "$scratch/slow.back"
same_content "$scratch/slow.img" "$scratch/slow.back"
slow_link slowdown "$slowdst_sock"
expect_copy --timeout 2 --connections 1 --depth 1 --request-size 2M "$slow_uri" "$scratch/slow.back2"
same_content "$scratch/slow.img" "$scratch/slow.back2"

log "--timeout: a server that accepts and never speaks"
silent_port=$(free_port)
"$PYTHON" -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
open(sys.argv[2], "w").write("ready")
c, _ = s.accept(); time.sleep(120)' "$silent_port" "$scratch/silent.ready" &
silent=$!
on_exit "kill $silent"
wait_for_file "$scratch/silent.ready" || fail "the silent server did not start"
expect_failure "did not finish within 2 seconds (--timeout)" copy --timeout 2 "$scratch/random.img" "nbd://127.0.0.1:$silent_port/"
# Without --timeout the handshake is still bounded: --connect-timeout (30 s by default).
start=$SECONDS
expect_failure "did not finish within 2 seconds (--connect-timeout)" copy --connect-timeout 2 "nbd://127.0.0.1:$silent_port/" null:
(( SECONDS - start < 20 )) || fail "--connect-timeout 2 took $((SECONDS - start)) s"

log "a read-only export is refused before anything is written"
nbdkit_unix readonly -r --filter=log memory 64M logfile="$scratch/ro.log"
expect_failure "is read-only; nothing was written" copy "$scratch/random.img" "$uri"
! grep -q ' Write \| Zero ' "$scratch/ro.log" || fail "data moved to a read-only export"

log "an export smaller than the source is refused before anything is written"
nbdkit_unix small --filter=log memory 32M logfile="$scratch/small.log"
expect_failure "holds 33554432 bytes, fewer than the source's 67108864" copy "$scratch/random.img" "$uri"
! grep -q ' Write \| Zero ' "$scratch/small.log" || fail "data moved to a too small export"

log "ok"
