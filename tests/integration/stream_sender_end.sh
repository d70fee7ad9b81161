#!/bin/bash
# How a one-way sender (Chunked, raw) ends. After its last byte it waits for the
# receiver to close: a clean close is success; a reset, which is how a receiver that
# gave up with bytes unread closes, makes the copy fail with a message that says so,
# since nothing else can tell a one-way sender that its transfer was refused. The
# receiver here is a small Python server that reads the whole stream and closes, or
# closes with the last 12 bytes unread, over TCP and Unix sockets.
. "$SOURCE_ROOT/tests/integration/stream_lib.sh"

make_image image.img $((1024 * 1024 + 4096))

# receiver ADDRESS BYTES MODE [PORT_FILE]: reads BYTES and closes (close), or closes
# with the last 12 of them unread (reset). A TCP receiver binds port 0 and writes the
# port the kernel gave it to PORT_FILE once it listens: a port picked free beforehand
# can be taken by a parallel test before it is bound.
receiver() {
  $PY - "$@" <<'PYEOF' &
import os, socket, sys
address, total, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if address.startswith("/"):
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
else:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    host, port = address.rsplit(":", 1)
    server.bind((host, int(port)))
server.listen(1)
if len(sys.argv) > 4 and not address.startswith("/"):
    with open(sys.argv[4] + ".tmp", "w") as f:
        f.write(str(server.getsockname()[1]))
    os.rename(sys.argv[4] + ".tmp", sys.argv[4])
conn, _ = server.accept()
# A receiver that gives up leaves bytes unread; closing then resets the connection
# (TCP sends a reset, a Unix socket hands its peer ECONNRESET).
want = total if mode == "close" else total - 12
got = 0
while got < want:
    data = conn.recv(min(1 << 20, want - got))
    if not data:
        sys.exit("receiver: the stream ended after %d of %d bytes" % (got, total))
    got += len(data)
if mode == "reset":
    # Wait until the last 12 bytes have arrived, unread, so the close finds them.
    if len(conn.recv(12, socket.MSG_PEEK | socket.MSG_WAITALL)) != 12:
        sys.exit("receiver: the stream ended early")
conn.close()
PYEOF
  RECEIVER_PID=$!
  SERVER_PIDS+=("$RECEIVER_PID")
}

run_case() {  # run_case TRANSPORT PROTOCOL MODE
  local transport=$1 protocol=$2 mode=$3 port address dest bytes rc name="$1/$2 receiver $3s"
  case $protocol in
    chunked) bytes=$((12 + 1024 * 1024 + 12 + 4096 + 12)) ;;  # two chunks and the terminator
    raw) bytes=$((1024 * 1024 + 4096)) ;;
  esac
  case $transport in
    tcp) address=127.0.0.1:0 ;;
    unix) rm -f "$WORK/r.sock"; address=$WORK/r.sock dest=unix://$WORK/r.sock ;;
  esac
  rm -f "$WORK/port"
  receiver "$address" "$bytes" "$mode" "$WORK/port"
  if [ "$transport" = tcp ]; then
    for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
    [ -s "$WORK/port" ] || { fail "$name: the receiver did not say its port"; return; }
    dest=tcp://127.0.0.1:$(cat "$WORK/port")
  fi
  wait_listening "$dest" || { fail "$name: the receiver did not start"; return; }
  "$SLUICE" copy --protocol "$protocol" --request-size 1M image.img "$dest" >/dev/null 2>copy.log
  rc=$?
  wait "$RECEIVER_PID" || fail "$name: the receiver failed"
  if [ "$mode" = close ]; then
    [ $rc -eq 0 ] && pass "$name: success" || fail "$name: exit $rc: $(cat copy.log)"
  elif [ $rc -eq 1 ] && grep -q 'reset the connection after the last byte' copy.log; then
    pass "$name: $(tail -1 copy.log)"
  else
    fail "$name: exit $rc, expected 1 and the reset named: $(cat copy.log)"
  fi
}

for transport in tcp unix; do
  for protocol in chunked raw; do
    run_case $transport $protocol close
    run_case $transport $protocol reset
  done
done

finish
