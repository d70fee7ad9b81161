#!/bin/bash
# Bad input gets the spec's answer and harms nobody else: ranges beyond the end,
# requests over 32 MiB, misaligned requests, unknown flags and commands, writes to a
# read-only export, a bad magic, a request cut short, a client stalled in the
# handshake, connections beyond --max-connections, and a full disk.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdsh python3

truncate -s 64M "$WORK/disk.img"
SOCK="$WORK/nbd.sock"
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --handshake-timeout 2 --max-connections 3
U="nbd+unix:///disk?socket=$SOCK"

# libnbd checks most of this itself; strict mode off makes it send what it is told.
cat >"$WORK/expect.py" <<'PY'
import errno, nbd

def expect(what, fn, code):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == errno.errorcode[code], "%s: got %s, expected %s" % (what, e.errno, errno.errorcode[code])
        print("ok: %s -> %s" % (what, e.errno))
        return
    raise AssertionError("%s: no error, expected %s" % (what, errno.errorcode[code]))
PY
export PYTHONPATH="$WORK:$PYTHONPATH"

nbdsh -u "$U" -c '
import errno
from expect import expect
h.set_strict_mode(0)
size = h.get_size()
M = 1 << 20
expect("READ beyond the end", lambda: h.pread(4096, size - 2048), errno.EINVAL)
expect("WRITE beyond the end", lambda: h.pwrite(b"x" * 4096, size - 2048), errno.ENOSPC)
expect("WRITE_ZEROES beyond the end", lambda: h.zero(4096, size), errno.ENOSPC)
expect("TRIM beyond the end", lambda: h.trim(4096, size), errno.EINVAL)
expect("CACHE beyond the end", lambda: h.cache(4096, size), errno.EINVAL)
expect("READ with an offset past 2^63", lambda: h.pread(512, (1 << 64) - 512), errno.EINVAL)
expect("READ over 32 MiB", lambda: h.pread(32 * M + 4096, 0), errno.EINVAL)
expect("WRITE over 32 MiB", lambda: h.pwrite(b"y" * (32 * M + 4096), 0), errno.EINVAL)
# The refused payload was read past: the connection is still in step.
assert h.pread(4096, 0) == bytes(4096), "connection out of step after the refused WRITE"
assert h.pread(4096, 32 * M) == bytes(4096), "the refused WRITE was written"
# Data spliced from an offset that is not page aligned spans one page more than its
# length: a READ of several pipefuls there must still complete (it once could not).
data = bytes(range(256)) * (3 * M // 256)
h.pwrite(data, 512)
assert h.pread(len(data), 512) == data, "a READ at an unaligned offset came back wrong"
print("ok: a 3 MiB READ at offset 512")
expect("unknown command flag", lambda: h.pread(512, 0, flags=1 << 7), errno.EINVAL)
expect("NO_HOLE on READ", lambda: h.pread(512, 0, flags=nbd.CMD_FLAG_NO_HOLE), errno.EINVAL)
expect("REQ_ONE on WRITE", lambda: h.pwrite(b"z" * 512, 0, flags=nbd.CMD_FLAG_REQ_ONE), errno.EINVAL)
expect("FAST_ZERO on TRIM", lambda: h.trim(512, 0, flags=nbd.CMD_FLAG_FAST_ZERO), errno.EINVAL)
h.pwrite(b"w" * 4096, 8192)
assert h.pread(4096, 8192) == b"w" * 4096
print("ok: the connection still works after every refusal")
# Zero-length requests: unspecified by the protocol, so any answer but a dead server
# will do (a zero-length WRITE once crashed it); they change nothing.
for what, fn in (("WRITE", lambda: h.pwrite(b"", 4096)), ("WRITE FUA", lambda: h.pwrite(b"", 4096, flags=nbd.CMD_FLAG_FUA)),
                 ("READ", lambda: h.pread(0, 4096)), ("WRITE_ZEROES", lambda: h.zero(0, 8192)),
                 ("TRIM", lambda: h.trim(0, 8192)), ("CACHE", lambda: h.cache(0, 8192))):
    try:
        fn()
    except nbd.Error as e:
        print("zero-length %s refused: %s" % (what, e))
assert h.pread(4096, 8192) == b"w" * 4096, "a zero-length request changed the data"
print("ok: zero-length requests leave the server and the data as they were")
' || die "range, size and flag checks"

# Unknown commands, FLUSH with a range, and the transmission after them: raw client.
python3 - "$SOCK" <<'PY' || die "unknown command"
import sys, rawnbd
s = rawnbd.connect(sys.argv[1])
rawnbd.go(s, "disk")   # no structured replies: simple replies carry the errors
rawnbd.request(s, 42, 0, 512, cookie=7)
assert rawnbd.simple_reply(s) == (22, 7), "unknown command: not EINVAL"
rawnbd.request(s, 3, 4096, 0, cookie=8)  # FLUSH must have offset 0
assert rawnbd.simple_reply(s) == (22, 8), "FLUSH with an offset: not EINVAL"
rawnbd.request(s, 3, 0, 0, cookie=9)
assert rawnbd.simple_reply(s) == (0, 9), "FLUSH failed"
rawnbd.request(s, 2, 0, 0)  # DISC
assert rawnbd.closed(s), "DISC did not close the connection"
print("ok: unknown command -> EINVAL, FLUSH with a range -> EINVAL, DISC closes")
PY

# Unaligned requests where the minimum block size forbids them (O_DIRECT exports).
if python3 -c "import os,sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT))" "$WORK/disk.img" 2>/dev/null; then
  DSOCK="$WORK/direct.sock"
  "$SLUICE" serve --protocol nbd --listen "unix://$DSOCK" --export disk="$WORK/disk.img" --direct >>"$WORK/server.log" 2>&1 &
  DPID=$!
  PIDS+=("$DPID")
  for i in $(seq 50); do [ -S "$DSOCK" ] && break; sleep 0.1; done
  nbdsh -u "nbd+unix:///disk?socket=$DSOCK" -c '
import errno
from expect import expect
h.set_strict_mode(0)
assert h.get_block_size(nbd.SIZE_MINIMUM) == 4096
expect("READ at an unaligned offset", lambda: h.pread(4096, 1000), errno.EINVAL)
expect("WRITE of an unaligned length", lambda: h.pwrite(b"u" * 1000, 0), errno.EINVAL)
expect("TRIM unaligned", lambda: h.trim(1000, 4096), errno.EINVAL)
h.pwrite(b"a" * 8192, 4096)
assert h.pread(8192, 4096) == b"a" * 8192
print("ok: aligned requests still work")
' || die "alignment checks"
  kill "$DPID"
fi

# A bad magic or a request cut short closes that connection only. The server frees a
# closed connection's slot (--max-connections 3) only once it has noticed the close,
# which a slow (sanitizer) build may not have done when the next one arrives: a GO
# refused for that reason is tried again (rawnbd.connect_go).
python3 - "$SOCK" "$U" <<'PY' || die "bad magic / truncated request"
import sys, time, nbd, rawnbd
def connect_go(path):
    return rawnbd.connect_go(path, "disk")
other = nbd.NBD()
other.connect_uri(sys.argv[2])
other.pwrite(b"k" * 4096, 0)
bad = connect_go(sys.argv[1])
rawnbd.request(bad, 0, 0, 512, magic=0x12345678)
assert rawnbd.closed(bad), "a bad magic did not close the connection"
cut = connect_go(sys.argv[1])
cut.sendall(b"\x25\x60\x95\x13\x00\x00\x00\x01")   # 8 of 28 header bytes
cut.close()
cut = connect_go(sys.argv[1])
rawnbd.request(cut, 1, 0, 65536)   # a WRITE whose payload never comes
cut.sendall(b"p" * 1000)
cut.close()
assert other.pread(4096, 0) == b"k" * 4096, "the other connection lost its data"
other.pwrite(b"l" * 4096, 0)
assert other.pread(4096, 0) == b"l" * 4096
other.shutdown()
print("ok: bad magic and truncated requests close only their own connection")
PY

# A client stalled in the handshake is dropped after --handshake-timeout (2 s).
python3 - "$SOCK" <<'PY' || die "handshake timeout"
import sys, time, rawnbd
s = rawnbd.connect_greeted(sys.argv[1])  # the greeting, then silence
s.settimeout(8)
start = time.monotonic()
assert rawnbd.closed(s), "not dropped within 8 s"
took = time.monotonic() - start
assert 1.5 < took < 6, "dropped after %.1f s, expected about 2" % took
print("ok: a silent client was dropped after %.1f s" % took)
PY

# --max-connections 3: a fourth client is refused at its GO, with ERR_POLICY naming
# the limit, and may try again once a slot comes back.
python3 - "$SOCK" <<'PY' || die "max connections"
import sys, time, socket, rawnbd
held = [rawnbd.connect_go(sys.argv[1], "disk") for i in range(3)]
extra = rawnbd.connect_greeted(sys.argv[1])
try:
    rawnbd.choose(extra, "disk")
    raise AssertionError("a fourth client beyond --max-connections 3 was served")
except rawnbd.Refused as e:
    assert "(--max-connections)" in str(e), "the refusal does not name the limit: %s" % e
held.pop().close()
for attempt in range(100):  # the same connection asks again until the slot is back
    try:
        rawnbd.choose(extra, "disk")
        break
    except rawnbd.Refused:
        time.sleep(0.1)
else:
    raise AssertionError("a freed slot was not given to the waiting client")
rawnbd.request(extra, 0, 0, 512, cookie=5)
assert rawnbd.simple_reply(extra) == (0, 5)
print("ok: the fourth client's GO was refused; asked again once a slot was free, it was served")
PY
# A client's export name is its own bytes: in the server's log a newline or an escape
# sequence in it is written as \xNN, so it cannot forge a log line or drive a terminal.
python3 - "$SOCK" <<'PY' || die "an unknown EXPORT_NAME"
import struct, sys
import rawnbd
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 1, b"nope\nsluice: forged line\x1b[31m")  # EXPORT_NAME
assert rawnbd.closed(s), "an unknown EXPORT_NAME did not end the connection"
print("ok: an unknown EXPORT_NAME closes the connection")
# The error string of a refused GO carries the name as UTF-8, as the spec asks of
# error strings, whatever bytes the client sent (it used to echo them raw).
s = rawnbd.connect_greeted(sys.argv[1])
name = b"\xff\xfebad\xc0\xaf caf\xc3\xa9\n"
rawnbd.option(s, 7, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))  # GO
_, rtype, text = rawnbd.option_reply(s)
assert rtype == 0x80000006, "GO for an unknown export: reply type 0x%x" % rtype  # ERR_UNKNOWN
message = text.decode("utf-8")  # raises on anything that is not UTF-8
assert message == "no export named '\\xff\\xfebad\\xc0\\xaf caf\u00e9\\x0a'", message
print("ok: the unknown export's name comes back as UTF-8: " + message)
PY
for i in $(seq 50); do grep -q 'unknown export' "$WORK/server.log" && break; sleep 0.1; done
grep -qF "client asked for unknown export 'nope\x0asluice: forged line\x1b[31m'" "$WORK/server.log" ||
  die "the export name was not escaped in the log: $(grep -a 'unknown export' "$WORK/server.log")"
if grep -q '^sluice: forged line' "$WORK/server.log" || grep -q $'\x1b' "$WORK/server.log"; then
  die "a client's export name forged a log line or wrote an escape sequence"
fi
# Probes that connect and hang up before choosing an export (a health check) end
# their sessions as a clean close does: nothing in the log. A hang-up with the
# greeting unread used to be logged as a reset, one before it went out as EPIPE.
# Refusals under --max-connections 3 are not the probes' doing but the limit's: a
# sanitizer build frees a slot more slowly than the probes come, and says so.
probe_lines() { grep -vc "refused a connection" "$WORK/server.log" || true; }
lines_before=$(probe_lines)
python3 - "$SOCK" <<'PY' || die "probes"
import socket, struct, sys, time, rawnbd
for i in range(5):
    s = rawnbd.connect(sys.argv[1])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
    s.close()
    s = rawnbd.connect(sys.argv[1])
    s.recv(5)  # part of the greeting, the rest unread
    s.close()
    s = rawnbd.connect_greeted(sys.argv[1])
    s.close()  # after the client flags, before any option
time.sleep(0.5)
PY
lines_after=$(probe_lines)
[ "$lines_after" -eq "$lines_before" ] ||
  die "probes that hung up were logged: $(grep -v "refused a connection" "$WORK/server.log" | tail -n +$((lines_before + 1)))"
pass "15 probes that hung up in the handshake left the log alone"
grep -q 'refused a connection' "$WORK/server.log" || die "the refusal was not reported"
grep -q 'dropped: no export chosen within 2 s' "$WORK/server.log" || die "the handshake timeout was not reported"
kill -0 "$SERVER_PID" || die "the server died"
stop_server
pass "the server survived all of it and stopped cleanly"

# A client that resets the connection in the middle of a 32 MiB READ reply, with more
# READs queued than the server takes at once (its reader waits for room, not on the
# socket): the log names the client (a Unix one by its process) and says what failed,
# the send. It said "cancelled": the failed send closed the reader's wait, and the
# reader's "cancelled" was reported instead.
: >"$WORK/server.log"
start_server "unix://$SOCK" --export disk="$WORK/disk.img"
client_pid=$(python3 - "$SOCK" <<'PY'
import os, socket, struct, sys
import rawnbd
s = rawnbd.connect_go(sys.argv[1], "disk")
for cookie in range(16):
    rawnbd.request(s, 0, 0, 32 << 20, cookie=cookie)  # READ
rawnbd.recv_exactly(s, 65536)  # the reply has started
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print(os.getpid())
PY
) || die "the mid-READ reset client"
for i in $(seq 100); do grep -q "pid $client_pid" "$WORK/server.log" && break; sleep 0.1; done
line=$(grep "pid $client_pid" "$WORK/server.log") || die "the mid-READ reset was not logged: $(cat "$WORK/server.log")"
[[ $line == *"unix socket (pid $client_pid, uid $(id -u))"* ]] || die "the client is not named by its process: $line"
[[ $line != *cancelled* ]] || die "the mid-READ reset was logged as a cancellation: $line"
[[ $line == *"Broken pipe"* || $line == *"Connection reset by peer"* ]] || die "the log does not say the send failed: $line"
kill -0 "$SERVER_PID" || die "the server died"
stop_server
pass "a reset in the middle of a READ reply: $line"

# Read-only exports refuse every write with EPERM.
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --read-only
nbdsh -u "$U" -c '
import errno
from expect import expect
h.set_strict_mode(0)
expect("WRITE to a read-only export", lambda: h.pwrite(b"x" * 512, 0), errno.EPERM)
expect("WRITE_ZEROES to a read-only export", lambda: h.zero(512, 0), errno.EPERM)
expect("TRIM on a read-only export", lambda: h.trim(512, 0), errno.EPERM)
h.pread(512, 0)
' || die "read-only refusals"
stop_server

# A full disk answers ENOSPC (a 1 MiB tmpfs under a 16 MiB sparse file).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/full" && mount -t tmpfs -o size=1M tmpfs "$WORK/full" 2>/dev/null; then
  MOUNTS+=("$WORK/full")
  truncate -s 16M "$WORK/full/disk.img"
  start_server "unix://$SOCK" --export disk="$WORK/full/disk.img"
  nbdsh -u "$U" -c '
import errno
from expect import expect
expect("WRITE to a full disk", lambda: h.pwrite(b"f" * (4 << 20), 0), errno.ENOSPC)
h.trim(4 << 20, 0)               # the partial write filled the disk: free it
h.pwrite(b"s" * 4096, 8 << 20)   # then what fits works again
assert h.pread(4096, 8 << 20) == b"s" * 4096
h.flush()
' || die "full disk"
  stop_server
else
  echo "note: not root or no tmpfs mount: full-disk case skipped"
fi

# A write past the server's file-size limit (ulimit -f) answers ENOSPC (the kernel's
# EFBIG) and the server goes on.
truncate -s 16M "$WORK/limited.img"
ulimit -S -f 8192
start_server "unix://$SOCK" --export disk="$WORK/limited.img"
ulimit -S -f unlimited
nbdsh -u "$U" -c '
import errno
from expect import expect
expect("WRITE past the file-size limit", lambda: h.pwrite(b"l" * 4096, 12 << 20), errno.ENOSPC)
h.pwrite(b"k" * 4096, 4096)
assert h.pread(4096, 4096) == b"k" * 4096
h.flush()
print("ok: the server still serves after a write past its file-size limit")
' || die "file-size limit"
kill -0 "$SERVER_PID" || die "the server died of a write past its file-size limit"
stop_server

# Out of descriptors: accept() fails with EMFILE while clients hold them all. The
# server says so once and goes on accepting when some are given back (it used to stop
# accepting for good and exit 1 once the last client left).
cat >"$WORK/limited-sluice" <<EOF
#!/bin/bash
ulimit -n 40
exec "$SLUICE" "\$@"
EOF
chmod +x "$WORK/limited-sluice"
SLUICE="$WORK/limited-sluice" start_server "unix://$SOCK" --threads 1 --max-connections 200 \
  --export disk="$WORK/disk.img"
python3 - "$SOCK" <<'PY' || die "out of descriptors"
import socket, sys, rawnbd
held = []
starved = False
for i in range(60):
    s = rawnbd.connect(sys.argv[1])
    s.settimeout(2)
    try:
        rawnbd.greet(s)
    except (socket.timeout, EOFError, ConnectionResetError):
        starved = True
        break
    held.append(s)
assert starved, "60 connections under ulimit -n 40 all got a greeting: the limit did not bite"
print("ok: %d connections took every descriptor" % len(held))
waiting = s
for held_socket in held[:10]:
    held_socket.close()
waiting.settimeout(10)
rawnbd.greet(waiting)  # the queued client is accepted once descriptors come back
fresh = rawnbd.connect_go(sys.argv[1], "disk")
rawnbd.request(fresh, 0, 0, 512, cookie=3)
assert rawnbd.simple_reply(fresh) == (0, 3)
print("ok: accepting again once descriptors were given back")
PY
grep -q "cannot accept a connection for now: Too many open files" "$WORK/server.log" ||
  die "running out of descriptors was not reported"
[ "$(grep -c "cannot accept a connection for now" "$WORK/server.log")" -eq 1 ] ||
  die "running out of descriptors was reported more than once"
stop_server
pass "out of descriptors: said once, accepting again when they come back, exit 0 on SIGTERM"

# No descriptor left for a pipe: spliced READs and WRITEs go through memory instead,
# and every connection keeps being served (each one used to be dropped with "cannot
# create a pipe: Too many open files"). As many connections as leave one descriptor
# free, and a pipe takes two.
SLUICE="$WORK/limited-sluice" start_server "unix://$SOCK" --threads 1 --max-connections 100 \
  --export disk="$WORK/disk.img"
/usr/bin/python3 - "$SOCK" "$SERVER_PID" <<'PY' || die "no descriptors for pipes"
import nbd, os, sys
sock, pid = sys.argv[1], sys.argv[2]
open_fds = lambda: len(os.listdir("/proc/%s/fd" % pid))
handles = []
while open_fds() < 39:
    h = nbd.NBD()
    h.set_export_name("disk")
    h.connect_unix(sock)
    handles.append(h)
assert len(handles) >= 4, "only %d connections fit" % len(handles)
for i, h in enumerate(handles):
    h.pwrite(bytes([65 + i]) * 65536, i * 65536)
for i, h in enumerate(handles):
    assert h.pread(65536, i * 65536) == bytes([65 + i]) * 65536, "connection %d read back wrong data" % i
    assert h.pread(65536, 8 << 20) == bytes(65536), "a hole read back wrong"
for h in handles:
    h.shutdown()
print("ok: %d connections wrote and read with no descriptor to spare for a pipe" % len(handles))
PY
if grep -q "cannot create a pipe" "$WORK/server.log"; then die "a connection was dropped for want of a pipe"; fi
stop_server

# The soft descriptor limit is raised to the hard one at start (a few dozen busy
# clients reached the usual 1024).
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -gt 256 ]; then
  cat >"$WORK/soft-sluice" <<EOF
#!/bin/bash
ulimit -Sn 256
exec "$SLUICE" "\$@"
EOF
  chmod +x "$WORK/soft-sluice"
  SLUICE="$WORK/soft-sluice" start_server "unix://$SOCK" --threads 1 --export disk="$WORK/disk.img"
  soft=$(awk '/^Max open files/ {print $4}' "/proc/$SERVER_PID/limits")
  [ "$soft" = "$hard" ] || die "the soft descriptor limit is $soft, not raised to the hard $hard"
  stop_server
  pass "the soft descriptor limit was raised from 256 to $hard"
fi

# A block device with 4 KiB sectors refuses unaligned fallocate ranges with EINVAL:
# that request falls back to writing zeros, and fast zeroing still works afterwards
# (one unaligned request once turned it off for good: FAST_ZERO then failed ENOTSUP).
truncate -s 64M "$WORK/sectors.img"
if [ "$(id -u)" -eq 0 ] && command -v losetup >/dev/null &&
  device=$(losetup -b 4096 --find --show "$WORK/sectors.img" 2>/dev/null); then
  trap 'cleanup; losetup -d "$device" 2>/dev/null || true' EXIT
  start_server "unix://$SOCK" --threads 1 --export disk="$device"
  nbdsh -u "$U" -c '
h.set_strict_mode(0)
assert h.can_fast_zero()
h.pwrite(b"x" * (2 << 20), 0)
h.zero(512, 512)
assert h.pread(1536, 0) == b"x" * 512 + bytes(512) + b"x" * 512, "unaligned WRITE_ZEROES"
h.zero(1 << 20, 1 << 20, flags=nbd.CMD_FLAG_FAST_ZERO)
assert h.pread(1 << 20, 1 << 20) == bytes(1 << 20), "FAST_ZERO after an unaligned zero"
print("ok: unaligned WRITE_ZEROES on a 4K-sector device, then FAST_ZERO")
' || die "zeroing a 4K-sector block device"
  stop_server
else
  echo "note: not root or no loop device: 4K-sector block device case skipped"
fi
echo "all passed"
