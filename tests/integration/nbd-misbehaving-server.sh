#!/bin/bash
# sluice copy against an NBD server that breaks the rules on purpose
# (fake_nbd_server.py). Each fault must end the copy with exit 1, nothing on stdout
# (no --stats of a copy that "worked") and exactly one line on stderr naming the
# request, with its offset wherever the reply lets the client know it; never success,
# never a hang (every copy runs under a 30 s watchdog):
#  - writing (FILE -> NBD), structured replies on and off: a wrong reply magic, a cookie
#    never sent, a server that stops answering (--timeout), one that hangs up mid-copy
#    and one that hangs up on the FLUSH after every WRITE succeeded, EIO for the WRITE
#    at a known offset;
#  - reading (NBD -> null: or a file): a structured reply that leaves bytes out, a data
#    chunk beyond the request, ERROR_OFFSET at a known byte, a simple reply cut short,
#    and the same magic, cookie, silence and hang-up faults (one during BLOCK_STATUS).
# nbdkit cannot stand in here: its error filter fails requests with well-formed replies.
. "$(dirname "$0")/nbd-functions.sh"

export SLUICE_TIMEOUT=30
# 64 requests of 64 KiB each: a fault after a few lands with more still in flight.
copy_args=(--stats --request-size 64k)
src=$scratch/src.img
export_img=$scratch/export.img
random_file "$src" 4M
random_file "$export_img" 4M

server_pid=
server_log=
# fake_server NAME ARGS...: the fake server on $scratch/NAME.sock for one connection,
# serving IMAGE (default $export_img); sets $uri.
fake_server() {
  local name=$1 image=$export_img
  shift
  if [[ $1 == --image ]]; then
    image=$2
    shift 2
  fi
  server_log=$scratch/$name.log
  "$PYTHON" "$tests_dir/fake_nbd_server.py" --socket "$scratch/$name.sock" --image "$image" \
    --ready "$scratch/$name.ready" --log "$server_log" "$@" 2>>"$scratch/servers.err" &
  server_pid=$!
  on_exit "kill $server_pid"
  wait_for_file "$scratch/$name.ready" || fail "fake_nbd_server.py $* did not start"
  uri="nbd+unix:///x?socket=$scratch/$name.sock"
}

# server_done: the server ended by itself once the client let go (its own alarm would
# exit 142) and did inject its fault, so the copy failed on that fault and nothing else.
server_done() {
  local status=0
  wait "$server_pid" || status=$?
  ((status == 0)) || fail "fake_nbd_server.py exited $status (3: its fault was never injected): $(cat "$server_log")"
  [[ $mode == good ]] || grep -q '^fault: ' "$server_log" || fail "no fault in $server_log"
}

# failed MESSAGE COPY-ARGS...: the copy exits 1, says MESSAGE (a fixed string) on its
# single stderr line, prints no statistics, and the server got to inject its fault.
mode=fault
failed() {
  local message=$1
  shift
  expect_failure "$message" copy "${copy_args[@]}" "$@"
  [[ $(wc -l <<<"$err") -eq 1 && $err == "sluice: "* ]] || fail "expected a single 'sluice: ' line, got: $err"
  [[ -z $out ]] || fail "a failed copy printed statistics: $out"
  log "  $err"
  server_done
}

log "the fake server, well behaved, is a correct NBD server both ways"
mode=good
truncate -s 4M "$scratch/blank.img"
fake_server good-write --image "$scratch/blank.img" --mode good
expect_copy --request-size 64k "$src" "$uri"
server_done
same_content "$src" "$scratch/blank.img"
fake_server good-read --mode good
expect_copy --request-size 64k "$uri" "$scratch/read.img"
server_done
same_content "$export_img" "$scratch/read.img"
mode=fault

for sr in "" --no-sr; do
  log "writing${sr:+ ($sr)}: a wrong reply magic for the 5th WRITE"
  fake_server wmagic$sr --mode bad-magic --after 5 $sr
  failed "broke the protocol: NBD reply: magic is 0x67446699" "$src" "$uri"
  [[ $err == "sluice: NBD WRITE of 65536 bytes at offset "* ]] || fail "the WRITE is not named: $err"

  log "writing${sr:+ ($sr)}: EIO for the WRITE at offset 1 MiB"
  fake_server weio$sr --mode error-reply --offset 1048576 $sr
  failed "NBD WRITE of 65536 bytes at offset 1048576 failed: the server (" "$src" "$uri"
  [[ $err == *"answered EIO (Input/output error)"* ]] || fail "the server's error is not named: $err"
  # With structured replies the error came in an ERROR chunk, which carries the
  # server's own words.
  [[ -n $sr || $err == *": injected by fake_nbd_server" ]] || fail "the server's message is lost: $err"
done

log "writing: a reply for a cookie never sent"
fake_server wcookie --mode unknown-cookie --after 5
failed "a simple reply for cookie 0xbad0c0ffee000000, which matches no request in flight" "$src" "$uri"
[[ $err == "sluice: NBD WRITE of 65536 bytes at offset "* ]] || fail "the WRITE is not named: $err"

# silent_after_5 NAME WRITE|READ: the server stops answering after 5 requests while
# the copy writes to it or reads from it; --timeout 2 ends the copy well within the
# watchdog, naming that command.
silent_after_5() {
  fake_server "$1" --mode hang --after 5
  local start=$SECONDS
  if [[ $2 == WRITE ]]; then
    failed "no reply from " --timeout 2 "$src" "$uri"
  else
    failed "no reply from " --timeout 2 "$uri" "$scratch/out.img"
  fi
  (( SECONDS - start < 20 )) || fail "--timeout 2 took $((SECONDS - start)) s"
  [[ $err == "sluice: NBD $2 of 65536 bytes at offset "* ]] || fail "the $2 is not named: $err"
}

log "writing: the server stops answering after 5 requests (--timeout 2)"
silent_after_5 whang WRITE

log "writing: the server hangs up after answering 5 requests"
fake_server wdrop --mode drop --after 5
failed "NBD WRITE of 65536 bytes at offset " "$src" "$uri"
[[ $err == *" broke: "* ]] || fail "the broken connection is not named: $err"

log "writing: every WRITE answered, then a hang-up instead of the FLUSH's reply"
fake_server wflush --mode drop --after 64
failed "NBD FLUSH failed: the connection to " "$src" "$uri"

log "reading: a structured READ reply that leaves the second half out"
fake_server rshort --mode short-read --after 3
failed "READ of 65536 bytes at offset 131072 leaving bytes [163840, 196608) uncovered" "$uri" null:

log "reading: an OFFSET_DATA chunk just past the requested range"
fake_server rbeyond --mode read-beyond --after 3
failed "OFFSET_DATA chunk for 512 bytes at offset 196608 lies outside the READ of 65536 bytes at offset 131072" \
  "$uri" null:
# The request whose reply broke the rules is the one named, not a later one in flight.
[[ $err == "sluice: NBD READ of 65536 bytes at offset 131072 failed: "* ]] || fail "the culprit READ is not named: $err"

log "reading: an ERROR_OFFSET chunk for byte 1050000, after the data before it"
fake_server reio --mode error-reply --command read --offset 1050000
failed "READ at offset 1050000 (of 65536 bytes at offset 1048576) failed with EIO (Input/output error)" \
  "$uri" "$scratch/out.img"

log "reading: a data chunk for a cookie never sent"
fake_server rcookie --mode unknown-cookie --command read --after 3
failed "chunk for cookie 0xbad0c0ffee000000, which matches no request in flight" "$uri" null:
[[ $err == "sluice: NBD READ of 65536 bytes at offset "* ]] || fail "the READ is not named: $err"

log "reading: no answer to the first request, BLOCK_STATUS (--timeout 2)"
fake_server rhang0 --mode hang --after 0
start=$SECONDS
failed "NBD BLOCK_STATUS of 4194304 bytes at offset 0 failed: no reply from " --timeout 2 "$uri" null:
(( SECONDS - start < 20 )) || fail "--timeout 2 took $((SECONDS - start)) s"

log "reading: the server stops answering after 5 requests (--timeout 2)"
silent_after_5 rhang READ

log "reading: the server hangs up after answering 5 requests"
fake_server rdrop --mode drop --after 5
failed "NBD READ of 65536 bytes at offset " "$uri" null:
[[ $err == *" broke: "* ]] || fail "the broken connection is not named: $err"

log "reading (--no-sr): a wrong reply magic for the 3rd READ"
fake_server rmagic --mode bad-magic --command read --after 3 --no-sr
failed "broke the protocol: NBD reply: magic is 0x67446699" "$uri" null:
[[ $err == "sluice: NBD READ of 65536 bytes at offset "* ]] || fail "the READ is not named: $err"

log "reading (--no-sr): a simple reply whose data stops halfway, then a hang-up"
# Which the client notices first, the cut-short reply or a later request that cannot
# be sent, is a race: either way the connection broke under a READ.
fake_server rcut --mode short-read --after 3 --no-sr
failed "NBD READ of 65536 bytes at offset " "$uri" null:
[[ $err == *" broke: "* || $err == *"closed the connection"* ]] || fail "the broken connection is not named: $err"

log "reading (--no-sr): EIO in the simple reply to the READ at offset 1 MiB"
fake_server rsimple --mode error-reply --command read --offset 1048576 --no-sr
failed "NBD READ of 65536 bytes at offset 1048576 failed: the server (" "$uri" null:
[[ $err == *"answered EIO (Input/output error)" ]] || fail "the server's error is not named: $err"

log "ok"
