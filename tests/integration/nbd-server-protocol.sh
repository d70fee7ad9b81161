#!/bin/bash
# Protocol corners of `sluice serve --protocol nbd` that the other nbd-server-*.sh
# tests leave out: the handshake's replies byte by byte (unknown options, INFO, meta
# contexts, STARTTLS without TLS), --tls=off and client certificates (--tls-ca), CACHE,
# DISC with requests in flight, replies matched by cookie and sent in completion
# order, OFFSET_HOLE chunks for holes, refusing new connections after SIGTERM,
# BLOCK_STATUS with REQ_ONE, I/O after an old-style EXPORT_NAME, and FAST_ZERO refused
# with ENOTSUP where zeroing would mean writing zeros.
source "$(dirname "$0")/nbd_server_lib.sh"
requires nbdsh nbdinfo python3 openssl

truncate -s 64M "$WORK/disk.img"
# What the Python snippets share: sizes, layouts, and the option and chunk parsers
# the lib's raw client lacks.
cat >"$WORK/proto.py" <<'PY'
import struct, rawnbd

M = 1 << 20
DISK_SIZE = 64 * M
SIMPLE_MAGIC = 0x67446698
STRUCTURED_MAGIC = 0x668E33EF
ACK, SERVER, INFO, META_CONTEXT = 1, 2, 3, 4
ERR_UNSUP, ERR_POLICY, ERR_UNKNOWN = 0x80000001, 0x80000002, 0x80000006
OFFSET_DATA, OFFSET_HOLE = 1, 2
DONE = 1

def pattern(offset, length):
    """Bytes that name their own offset: every 8-byte word is its offset."""
    return struct.pack(">%dQ" % (length // 8), *range(offset, offset + length, 8))

def sparse_data(offset, length):
    """What sparse.img holds in [offset, offset + length)."""
    out = bytearray(length)
    for mib in range(0, 32, 2):
        lo, hi = max(offset, mib * M), min(offset + length, (mib + 1) * M)
        if lo < hi:
            out[lo - offset:hi - offset] = pattern(mib * M, M)[lo - mib * M:hi - mib * M]
    return bytes(out)

def info_option(s, opt, name, requests=()):
    n = name.encode()
    rawnbd.option(s, opt, struct.pack(">I", len(n)) + n + struct.pack(">H", len(requests)) +
                  b"".join(struct.pack(">H", r) for r in requests))

def meta_option(s, opt, name, queries):
    n = name.encode()
    body = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        body += struct.pack(">I", len(q)) + q.encode()
    rawnbd.option(s, opt, body)

def replies_until_final(s, opt):
    """Every reply to one option up to and including its final one (ACK or an error)."""
    got = []
    while True:
        o, rtype, data = rawnbd.option_reply(s)
        assert o == opt, "reply for option %d while waiting for %d" % (o, opt)
        got.append((rtype, data))
        if rtype == ACK or rtype & 0x80000000:
            return got

def go_structured(s, name):
    """Structured replies, then GO: a connection ready for transmission."""
    rawnbd.option(s, 8)
    assert rawnbd.option_reply(s)[1] == ACK, "STRUCTURED_REPLY refused"
    rawnbd.choose(s, name)

def chunk(s):
    """One structured reply chunk: (flags, type, cookie, payload)."""
    magic, flags, ctype, cookie, length = struct.unpack(">IHHQI", rawnbd.recv_exactly(s, 20))
    assert magic == STRUCTURED_MAGIC, "not a structured reply chunk: magic 0x%x" % magic
    return flags, ctype, cookie, rawnbd.recv_exactly(s, length)

def structured_read(s, offset, length, cookie):
    """A READ's chunks, checked to cover [offset, offset + length) exactly once; returns
    the data it reassembles and the chunk types in arrival order."""
    rawnbd.request(s, 0, offset, length, cookie=cookie)
    data = bytearray(length)
    seen = [False] * length
    types = []
    while True:
        flags, ctype, c, payload = chunk(s)
        assert c == cookie, "chunk for cookie %d, expected %d" % (c, cookie)
        types.append(ctype)
        if ctype == OFFSET_DATA:
            at = struct.unpack(">Q", payload[:8])[0] - offset
            piece = payload[8:]
            assert len(piece) > 0 and 0 <= at and at + len(piece) <= length, "OFFSET_DATA outside the request"
            data[at:at + len(piece)] = piece
            span = range(at, at + len(piece))
        elif ctype == OFFSET_HOLE:
            assert len(payload) == 12, "OFFSET_HOLE payload of %d bytes, not 12" % len(payload)
            at, size = struct.unpack(">QI", payload)
            at -= offset
            assert size > 0 and 0 <= at and at + size <= length, "OFFSET_HOLE outside the request"
            span = range(at, at + size)
        else:
            raise AssertionError("unexpected chunk type %d (payload %r)" % (ctype, payload[:64]))
        assert not any(seen[i] for i in (span.start, span.stop - 1)), "chunks overlap"
        seen[span.start:span.stop] = [True] * len(span)
        if flags & DONE:
            break
    assert all(seen), "the chunks leave part of the READ uncovered"
    return bytes(data), types
PY
# sparse.img: 1 MiB of data at every even MiB below 32 MiB, a hole everywhere else.
# Nothing writes to it, so its holes stay where they are for the whole test.
python3 - "$WORK/sparse.img" <<'PY'
import os, sys, proto
with open(sys.argv[1], "wb") as f:
    f.truncate(proto.DISK_SIZE)
    for mib in range(0, 32, 2):
        f.seek(mib * proto.M)
        f.write(proto.pattern(mib * proto.M, proto.M))
PY
# The hole cases mean nothing on a file system that reports no holes.
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); assert os.lseek(fd, 0, os.SEEK_HOLE) == 1 << 20' \
  "$WORK/sparse.img" || die "the scratch file system does not report holes in sparse.img"

SOCK="$WORK/nbd.sock"
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --export sparse="$WORK/sparse.img"
U="nbd+unix:///disk?socket=$SOCK"

# 1. Unknown options get ERR_UNSUP and negotiation goes on, to GO or to ABORT.
python3 - "$SOCK" <<'PY' || die "unknown option"
import sys, rawnbd
from proto import *
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 42, b"stray")
opt, rtype, _ = rawnbd.option_reply(s)
assert (opt, rtype) == (42, ERR_UNSUP), "option 42: reply 0x%x for option %d, expected ERR_UNSUP for 42" % (rtype, opt)
rawnbd.choose(s, "disk")
rawnbd.request(s, 0, 0, 512, cookie=11)
assert rawnbd.simple_reply(s) == (0, 11), "READ after ERR_UNSUP failed"
rawnbd.recv_exactly(s, 512)
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 42)
assert rawnbd.option_reply(s)[1] == ERR_UNSUP
rawnbd.option(s, 2)  # ABORT
assert rawnbd.option_reply(s)[:2] == (2, ACK), "ABORT after ERR_UNSUP not acknowledged"
assert rawnbd.closed(s), "ABORT did not end the connection"
PY
pass "option 42 -> ERR_UNSUP (0x80000001); GO and a READ, or ABORT, work afterwards"

# 2. INFO, an unknown name, and LIST_META_CONTEXT, checked byte by byte.
python3 - "$SOCK" <<'PY' || die "INFO / LIST_META_CONTEXT"
import struct, sys, rawnbd
from proto import *
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 8)  # structured replies: LIST_META_CONTEXT needs them
assert rawnbd.option_reply(s)[1] == ACK
info_option(s, 6, "disk", (1, 3))  # INFO asking for NAME and BLOCK_SIZE
infos = {}
for rtype, data in replies_until_final(s, 6):
    if rtype == INFO:
        infos[struct.unpack(">H", data[:2])[0]] = data[2:]
    else:
        assert rtype == ACK, "INFO for disk ended with 0x%x" % rtype
assert 0 in infos, "INFO without INFO_EXPORT (mandatory)"
assert len(infos[0]) == 10, "INFO_EXPORT of %d bytes" % len(infos[0])
size, flags = struct.unpack(">QH", infos[0])
assert size == DISK_SIZE, "INFO_EXPORT size %d, the file is %d" % (size, DISK_SIZE)
HAS_FLAGS, READ_ONLY, SEND_FLUSH, SEND_CACHE, CAN_MULTI_CONN = 1, 2, 4, 1 << 10, 1 << 8
assert flags & HAS_FLAGS and flags & SEND_FLUSH and flags & SEND_CACHE and flags & CAN_MULTI_CONN, "flags 0x%x" % flags
assert not flags & READ_ONLY, "a writable export advertised READ_ONLY (flags 0x%x)" % flags
assert infos.get(1) == b"disk", "INFO_NAME: %r" % infos.get(1)
assert 3 in infos and len(infos[3]) == 12, "no 12-byte INFO_BLOCK_SIZE"
minimum, preferred, maximum = struct.unpack(">III", infos[3])
# A buffered file: any alignment, 4 KiB preferred, the 32 MiB the server accepts.
assert (minimum, preferred, maximum) == (1, 4096, 32 << 20), "block sizes %d/%d/%d" % (minimum, preferred, maximum)

info_option(s, 6, "nope")
replies = replies_until_final(s, 6)
assert [r for r, _ in replies] == [ERR_UNKNOWN], "INFO for an unknown export: %s" % [hex(r) for r, _ in replies]

meta_option(s, 9, "disk", ["base:allocation"])
replies = replies_until_final(s, 9)
assert [r for r, _ in replies] == [META_CONTEXT, ACK], "LIST_META_CONTEXT: %s" % [hex(r) for r, _ in replies]
context = replies[0][1]
assert context == struct.pack(">I", 0) + b"base:allocation", "META_CONTEXT payload %r (LIST's id must be 0)" % context
meta_option(s, 9, "disk", ["qemu:dirty-bitmap:x"])  # a context the server does not have
assert [r for r, _ in replies_until_final(s, 9)] == [ACK], "an unknown context was listed"

# INFO leaves the connection in negotiation: GO follows, with the flags INFO told.
info_option(s, 7, "disk")
go = [d for r, d in replies_until_final(s, 7) if r == INFO and d[:2] == b"\0\0"]
assert go and struct.unpack(">QH", go[0][2:]) == (size, flags), "GO's INFO_EXPORT differs from INFO's"
PY
pass "INFO: size, flags, name and 1/4096/32M block sizes; unknown name -> ERR_UNKNOWN; base:allocation listed"

# 3. STARTTLS where there is no TLS: ERR_POLICY (handshake.cpp start_tls), then on as before.
python3 - "$SOCK" <<'PY' || die "STARTTLS without TLS"
import sys, rawnbd
from proto import *
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 5)
opt, rtype, message = rawnbd.option_reply(s)
assert (opt, rtype) == (5, ERR_POLICY), "STARTTLS: reply 0x%x, expected ERR_POLICY" % rtype
rawnbd.choose(s, "disk")
rawnbd.request(s, 3, 0, 0, cookie=5)  # FLUSH
assert rawnbd.simple_reply(s) == (0, 5), "FLUSH after a refused STARTTLS failed"
PY
pass "STARTTLS without credentials -> ERR_POLICY; GO and FLUSH work afterwards"

# 6. CACHE of written data and of a hole: success, and nothing changes.
python3 - "$U" <<'PY' || die "CACHE"
import sys, nbd
from proto import pattern, M
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.can_cache(), "SEND_CACHE not advertised"
h.pwrite(pattern(8 * M, 2 * M), 8 * M)
h.cache(2 * M, 8 * M)
h.cache(4096, 40 * M)  # never written: a hole
h.cache(4 * M + 1000, 7 * M + 12)  # unaligned, across data and hole
assert h.pread(2 * M, 8 * M) == pattern(8 * M, 2 * M), "data changed by CACHE"
assert h.pread(4096, 40 * M) == bytes(4096), "a cached hole no longer reads as zeros"
h.shutdown()
PY
pass "CACHE of data, of a hole and of an unaligned range succeeds; the data is intact"

# 7. DISC with writes still in flight: every write lands before the server closes.
python3 - "$U" <<'PY' || die "DISC after async writes (libnbd)"
import sys, nbd
from proto import pattern, M
h = nbd.NBD()
h.connect_uri(sys.argv[1])
base = 16 * M
buffers = [nbd.Buffer.from_bytearray(bytearray(pattern(base + i * M, M))) for i in range(12)]
for i, b in enumerate(buffers):
    h.aio_pwrite(b, base + i * M)
print("  %d writes in flight at shutdown" % h.aio_in_flight())
h.shutdown()  # DISC queued behind the writes; no reply is waited for here
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(12):
    assert h.pread(M, base + i * M) == pattern(base + i * M, M), "write %d lost across DISC" % i
h.shutdown()
PY
# The same without libnbd's help: the writes and DISC in one burst, then only reading.
python3 - "$SOCK" <<'PY' || die "DISC after pipelined writes (raw)"
import struct, sys, rawnbd
from proto import pattern, M
s = rawnbd.connect_go(sys.argv[1], "disk")
base = 32 * M
burst = b""
for i in range(8):
    burst += struct.pack(">IHHQQI", rawnbd.REQUEST_MAGIC, 0, 1, 100 + i, base + i * M, M) + pattern(base + i * M, M)
burst += struct.pack(">IHHQQI", rawnbd.REQUEST_MAGIC, 0, 2, 999, 0, 0)  # DISC
s.sendall(burst)
replies = set()
try:
    while True:
        replies.add(rawnbd.simple_reply(s))
except EOFError:
    pass
assert replies == {(0, 100 + i) for i in range(8)}, "replies before the close: %s" % sorted(replies)
s = rawnbd.connect_go(sys.argv[1], "disk")
for i in range(8):
    rawnbd.request(s, 0, base + i * M, M, cookie=i)
    assert rawnbd.simple_reply(s) == (0, i)
    assert rawnbd.recv_exactly(s, M) == pattern(base + i * M, M), "write %d lost across DISC" % i
PY
pass "DISC behind 12 async (libnbd) and 8 pipelined (raw) 1 MiB writes: all acknowledged and read back"

# 8. Many reads in flight, each answered with its own data, with structured replies
# (libnbd's default) and with simple ones (matched by nothing but the cookie).
python3 - "$SOCK" <<'PY' || die "64 reads in flight"
import random, sys, nbd
from proto import pattern, M
block, count, base = 64 * 1024, 64, 48 * M
for structured in (True, False):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    h.set_export_name("disk")
    h.connect_unix(sys.argv[1])
    assert h.get_structured_replies_negotiated() == structured
    if structured:
        h.pwrite(b"".join(pattern(base + i * block, block) for i in range(count)), base)
    order = list(range(count))
    random.shuffle(order)
    done, failed, buffers = [], [], {}
    def completed(i, err):
        (failed if err.value else done).append(i)
        return 1
    for i in order:
        buffers[i] = nbd.Buffer(block)
        h.aio_pread(buffers[i], base + i * block, lambda err, i=i: completed(i, err))
    while len(done) + len(failed) < count:
        h.poll(-1)
    assert not failed, "READs failed: %s" % failed
    for i in range(count):
        assert buffers[i].to_bytearray() == pattern(base + i * block, block), "READ %d got another's data" % i
    h.shutdown()
PY
pass "64 READs in flight, shuffled, each got its own data (structured and simple replies)"

# Completion order: a 32 MiB READ whose reply the client leaves unread, so the server
# is stuck sending it, then a 4 KiB READ. The small one's reply must come before the
# big one's last chunk: replies go out as they complete, not in request order. The big
# read spans data and holes, so its reply is several chunks whichever way it is sent.
python3 - "$SOCK" <<'PY' || die "completion order"
import sys, time, rawnbd
from proto import *
s = rawnbd.connect_greeted(sys.argv[1])
go_structured(s, "sparse")
rawnbd.request(s, 0, 0, 32 * M, cookie=1)
time.sleep(0.3)  # the server fills the socket buffer and waits for room
rawnbd.request(s, 0, 4096, 4096, cookie=2)
time.sleep(0.3)
data = {1: bytearray(32 * M), 2: bytearray(4096)}
finished = []
while len(finished) < 2:
    flags, ctype, cookie, payload = chunk(s)
    assert cookie in (1, 2) and cookie not in finished, "chunk for cookie %d" % cookie
    start = 0 if cookie == 1 else 4096
    if ctype == OFFSET_DATA:
        at = struct.unpack(">Q", payload[:8])[0] - start
        data[cookie][at:at + len(payload) - 8] = payload[8:]
    else:
        assert ctype == OFFSET_HOLE, "chunk type %d" % ctype
    if flags & DONE:
        finished.append(cookie)
assert finished == [2, 1], "the small READ finished after the big one: replies in request order"
assert bytes(data[2]) == sparse_data(4096, 4096) and bytes(data[1]) == sparse_data(0, 32 * M), "wrong data"
PY
pass "a 4 KiB READ issued behind a stalled 32 MiB READ was answered first"

# 9. Holes: OFFSET_HOLE with structured replies, zeros in a simple reply without them.
python3 - "$SOCK" <<'PY' || die "holes in READ replies"
import struct, sys, rawnbd
from proto import *
s = rawnbd.connect_greeted(sys.argv[1])
go_structured(s, "sparse")
data, types = structured_read(s, 40 * M, M, cookie=1)
assert OFFSET_HOLE in types and data == bytes(M), "a hole: chunk types %s" % types
data, types = structured_read(s, M, M, cookie=2)  # a hole between data
assert OFFSET_HOLE in types and data == bytes(M), "a hole between data: chunk types %s" % types
data, types = structured_read(s, 0, M, cookie=3)
assert set(types) == {OFFSET_DATA} and data == sparse_data(0, M), "data: chunk types %s" % types
data, types = structured_read(s, M // 2, 2 * M, cookie=4)  # data, hole, data
assert set(types) == {OFFSET_DATA, OFFSET_HOLE}, "data and a hole: chunk types %s" % types
assert data == sparse_data(M // 2, 2 * M), "data and a hole read back wrong"
s = rawnbd.connect_go(sys.argv[1], "sparse")  # no STRUCTURED_REPLY
rawnbd.request(s, 0, 40 * M, M, cookie=5)
assert rawnbd.simple_reply(s) == (0, 5)
assert rawnbd.recv_exactly(s, M) == bytes(M), "a hole in a simple reply is not zeros"
rawnbd.request(s, 0, M // 2, 2 * M, cookie=6)
assert rawnbd.simple_reply(s) == (0, 6)
assert rawnbd.recv_exactly(s, 2 * M) == sparse_data(M // 2, 2 * M), "data and a hole in a simple reply"
rawnbd.request(s, 3, 0, 0, cookie=7)  # in step after the payloads
assert rawnbd.simple_reply(s) == (0, 7)
PY
pass "holes come as OFFSET_HOLE, data as OFFSET_DATA; without structured replies, zeros in a simple reply"

# 11. BLOCK_STATUS with REQ_ONE: one extent, and only as long as the request, where a
# plain BLOCK_STATUS of the same range gives several.
nbdsh --base-allocation -u "nbd+unix:///sparse?socket=$SOCK" -c '
from proto import M
assert h.can_meta_context("base:allocation")
HOLE_ZERO = nbd.STATE_HOLE | nbd.STATE_ZERO
def status(length, offset, flags=0):
    got = []
    def extents(context, at, entries, err):
        assert context == "base:allocation" and at == offset, "extents for %s at %d" % (context, at)
        got.append(list(entries))
        return 0
    h.block_status(length, offset, extents, flags=flags)
    assert len(got) == 1, "%d extent lists for one context" % len(got)
    return got[0]
# sparse.img: data at [0, 1M), a hole at [1M, 2M), data at [2M, 3M), ...
assert len(status(3 * M, M // 2)) > 2, "the plain BLOCK_STATUS the REQ_ONE cases are compared with"
for offset, length, expected in ((M // 2, 3 * M, [M // 2, 0]),    # data, then hole and data
                                 (M, 3 * M, [M, HOLE_ZERO]),       # hole, then data
                                 (40 * M, 4096, [4096, HOLE_ZERO]),  # inside a 24 MiB hole
                                 (4096, 8192, [8192, 0])):          # inside 1 MiB of data
    entries = status(length, offset, nbd.CMD_FLAG_REQ_ONE)
    assert len(entries) == 2, "REQ_ONE at %d+%d: %d extents: %s" % (offset, length, len(entries) // 2, entries)
    assert 0 < entries[0] <= length, "REQ_ONE at %d+%d: extent of %d bytes" % (offset, length, entries[0])
    assert entries == expected, "REQ_ONE at %d+%d: %s, expected %s" % (offset, length, entries, expected)
print("ok: 4 REQ_ONE queries, one extent each, within the request")
' || die "BLOCK_STATUS with REQ_ONE"
pass "BLOCK_STATUS REQ_ONE: one extent, no longer than the request, the right kind"

# 12. Old-style EXPORT_NAME (no GO): the reply is size and flags, padded with 124
# zeros unless the client set NO_ZEROES; then a WRITE, a READ and a FLUSH on it, in
# step, and the written data seen by another connection.
python3 - "$SOCK" <<'PY' || die "EXPORT_NAME, then WRITE and READ"
import struct, sys, rawnbd
from proto import pattern, DISK_SIZE, M
HAS_FLAGS, READ_ONLY, SEND_FLUSH = 1, 2, 4
for client_flags, padding in ((3, 0), (1, 124)):  # FIXED_NEWSTYLE, with and without NO_ZEROES
    s = rawnbd.connect(sys.argv[1])
    rawnbd.recv_exactly(s, 18)
    s.sendall(struct.pack(">I", client_flags))
    rawnbd.option(s, 1, b"disk")  # EXPORT_NAME
    size, flags = struct.unpack(">QH", rawnbd.recv_exactly(s, 10))
    assert size == DISK_SIZE, "EXPORT_NAME: size %d, the file is %d" % (size, DISK_SIZE)
    assert flags & HAS_FLAGS and flags & SEND_FLUSH and not flags & READ_ONLY, "EXPORT_NAME: flags 0x%x" % flags
    if padding:
        assert rawnbd.recv_exactly(s, padding) == bytes(padding), "the padding is not zeros"
    offset = 60 * M + client_flags * 65536
    data = pattern(offset, 65536)
    rawnbd.request(s, 1, offset, len(data), cookie=21)
    s.sendall(data)
    assert rawnbd.simple_reply(s) == (0, 21), "WRITE after EXPORT_NAME failed"
    rawnbd.request(s, 0, offset, len(data), cookie=22)
    assert rawnbd.simple_reply(s) == (0, 22), "READ after EXPORT_NAME failed"
    assert rawnbd.recv_exactly(s, len(data)) == data, "READ after EXPORT_NAME: not what was written"
    rawnbd.request(s, 3, 0, 0, cookie=23)
    assert rawnbd.simple_reply(s) == (0, 23), "FLUSH after EXPORT_NAME failed"
    rawnbd.request(s, 2, 0, 0)  # DISC
    assert rawnbd.closed(s), "DISC did not close the connection"
    other = rawnbd.connect_go(sys.argv[1], "disk")
    rawnbd.request(other, 0, offset, len(data), cookie=24)
    assert rawnbd.simple_reply(other) == (0, 24)
    assert rawnbd.recv_exactly(other, len(data)) == data, "another connection does not see the write"
    other.close()
PY
pass "EXPORT_NAME (with and without NO_ZEROES): size, flags, then WRITE, READ, FLUSH in step; data seen elsewhere"
stop_server

# Certificates for 4 and 5: a CA, a server certificate for localhost, a client
# certificate from the CA and one from a CA the server does not know.
PKI="$WORK/pki"
mkdir -p "$PKI"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key "$PKI/ca-key.pem"
openssl req -x509 -new -key "$PKI/ca-key.pem" -days 1 -subj "/CN=sluice test CA" -out "$PKI/ca-cert.pem" 2>/dev/null
key "$PKI/other-ca-key.pem"
openssl req -x509 -new -key "$PKI/other-ca-key.pem" -days 1 -subj "/CN=another CA" -out "$PKI/other-ca-cert.pem" \
  2>/dev/null
issue() {  # issue NAME CA SUBJECT EXTENSION
  key "$PKI/$1-key.pem"
  openssl req -new -key "$PKI/$1-key.pem" -subj "$3" -out "$PKI/$1.csr" 2>/dev/null
  printf '%s\n' "$4" >"$PKI/$1.cnf"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2-cert.pem" -CAkey "$PKI/$2-key.pem" -CAcreateserial \
    -days 1 -extfile "$PKI/$1.cnf" -out "$PKI/$1-cert.pem" 2>/dev/null
}
issue server ca "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1"
issue client ca "/CN=client" "extendedKeyUsage=clientAuth"
issue stranger other-ca "/CN=stranger" "extendedKeyUsage=clientAuth"
# Client directories in libnbd's layout: each trusts the server's CA.
for who in client stranger none; do
  mkdir -p "$WORK/$who"
  cp "$PKI/ca-cert.pem" "$WORK/$who/ca-cert.pem"
  [ "$who" = none ] && continue
  cp "$PKI/$who-cert.pem" "$WORK/$who/client-cert.pem"
  cp "$PKI/$who-key.pem" "$WORK/$who/client-key.pem"
done

# 4. --tls=off overrides the credentials (nbd_export_service.cpp): plaintext is served,
# STARTTLS gets ERR_POLICY, and a client insisting on TLS cannot have it.
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" --tls=off \
  --tls-cert "$PKI/server-cert.pem" --tls-key "$PKI/server-key.pem"
info=$(nbdinfo "nbd://127.0.0.1:$PORT/disk") || die "nbdinfo without TLS against --tls=off"
grep -q 'with TLS' <<<"$info" && die "--tls=off negotiated TLS: $info"
nbdsh -u "nbd://127.0.0.1:$PORT/disk" -c '
assert not h.get_tls_negotiated()
h.pwrite(b"p" * 4096, 0)
assert h.pread(4096, 0) == b"p" * 4096
' || die "plaintext I/O against --tls=off"
python3 - "$PORT" <<'PY' || die "STARTTLS against --tls=off"
import sys, rawnbd
from proto import ERR_POLICY
s = rawnbd.connect_greeted(("127.0.0.1", int(sys.argv[1])))
rawnbd.option(s, 5)
assert rawnbd.option_reply(s)[1] == ERR_POLICY, "STARTTLS was not refused with ERR_POLICY"
PY
if nbdinfo "nbds://localhost:$PORT/disk?tls-certificates=$WORK/client" >/dev/null 2>&1; then
  die "a client requiring TLS got a connection from a --tls=off server"
fi
stop_server
pass "--tls=off with a certificate: plaintext served, STARTTLS -> ERR_POLICY, nbds:// fails"

# 5. --tls-ca: only clients with a certificate from that CA are served.
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" \
  --tls-cert "$PKI/server-cert.pem" --tls-key "$PKI/server-key.pem" --tls-ca "$PKI/ca-cert.pem"
# Python rather than nbdsh -u: a URI naming local files needs set_uri_allow_local_file.
python3 - "nbds://localhost:$PORT/disk?tls-certificates=$WORK" <<'PY' || die "--tls-ca"
import sys, nbd
def connect(who):
    h = nbd.NBD()
    h.set_uri_allow_local_file(True)
    h.connect_uri(sys.argv[1] + "/" + who)
    return h
h = connect("client")
assert h.get_tls_negotiated()
h.pwrite(b"c" * 65536, 65536)
assert h.pread(65536, 65536) == b"c" * 65536
h.shutdown()
for who, what in (("none", "no certificate"), ("stranger", "a certificate from another CA")):
    try:
        # TLS 1.3 lets the client finish its handshake before the server has judged
        # the certificate: the refusal may come with the first option after it.
        connect(who).pread(512, 0)
    except nbd.Error as e:
        print("  %s: refused (%s)" % (what, e))
        continue
    raise AssertionError("a client with %s was served" % what)
connect("client").shutdown()  # refusing did not stop the server
PY
# Refused for the certificates, in the TLS handshake, and not for anything else.
grep -q 'TLS handshake with .* failed: .*peer did not return a certificate' "$WORK/server.log" ||
  die "no certificate: not refused in the TLS handshake"
grep -q 'TLS handshake with .* failed: .*certificate verify failed' "$WORK/server.log" ||
  die "a certificate from another CA: not refused in the TLS handshake"
stop_server
pass "--tls-ca: a client certificate from the CA is served; none, or one from another CA, is refused"

# 10. After SIGTERM the listener is closed at once, even while the server is still
# finishing (here: held by a client that leaves a 32 MiB READ reply unread, which the
# server waits for up to its shutdown grace). nbd-server-shutdown.sh covers the rest.
start_server "unix://$SOCK" --export disk="$WORK/disk.img"
python3 - "$SOCK" "$SERVER_PID" <<'PY' || die "connections after SIGTERM"
import os, signal, socket, sys, time, rawnbd
path, pid = sys.argv[1], int(sys.argv[2])
held = rawnbd.connect_go(path, "disk")
rawnbd.request(held, 0, 0, 32 << 20, cookie=1)  # its reply is never read
time.sleep(0.3)
probe = rawnbd.connect_greeted(path, tries=1)  # accepting before the signal
probe.close()
os.kill(pid, signal.SIGTERM)
deadline = time.monotonic() + 5  # generous: ASan, a loaded machine
while True:
    try:
        s = rawnbd.connect(path)
    except (ConnectionRefusedError, FileNotFoundError) as e:
        refused = e
        break
    s.close()
    assert time.monotonic() < deadline, "still accepting connections 5 s after SIGTERM"
    time.sleep(0.02)
assert os.path.exists("/proc/%d" % pid) and open("/proc/%d/stat" % pid).read().split()[2] != "Z", \
    "the server had exited: the refusal proves nothing"
for i in range(3):  # and it stays refused
    try:
        rawnbd.connect(path).close()
        raise AssertionError("a connection was accepted after the refusal")
    except (ConnectionRefusedError, FileNotFoundError):
        time.sleep(0.05)
print("  refused after SIGTERM (%s) while the server was still running" % type(refused).__name__)
held.close()
PY
for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SERVER_PID" 2>/dev/null && die "the server did not exit after SIGTERM"
status=0
wait "$SERVER_PID" || status=$?
[ "$status" -eq 0 ] || die "exit status $status after SIGTERM with a client that stopped reading"
pass "after SIGTERM new connections are refused while the server finishes; then exit 0"

# 13. FAST_ZERO where zeroing means writing zeros: ENOTSUP, and nothing changed; the
# same zero without FAST_ZERO writes the zeros. An export on ramfs gets there without
# a block device: ramfs has no ZERO_RANGE and no holes to punch (tmpfs would not do: it
# punches and allocates). The ramfs is mounted in the server's own mount namespace,
# inside a user namespace, where an unprivileged user may mount one.
RAMFS="$WORK/ramfs"
mkdir -p "$RAMFS"
cat >"$WORK/ramfs-sluice" <<EOF
#!/bin/bash
mount -t ramfs ramfs "$RAMFS" && truncate -s 16M "$RAMFS/disk.img" || exit 1
exec "$SLUICE" "\$@"
EOF
cat >"$WORK/unshared-sluice" <<EOF
#!/bin/bash
exec unshare --user --map-root-user --mount "$WORK/ramfs-sluice" "\$@"
EOF
chmod +x "$WORK/ramfs-sluice" "$WORK/unshared-sluice"
if unshare --user --map-root-user --mount sh -c "mount -t ramfs ramfs '$RAMFS'" 2>/dev/null; then
  SLUICE="$WORK/unshared-sluice" start_server "unix://$SOCK" --export disk="$RAMFS/disk.img"
  # Looked at through the server's mount namespace: on another file system the case
  # would prove nothing.
  fstype=$(stat -f -c %T "/proc/$SERVER_PID/root$RAMFS/disk.img") || die "cannot see the server's export"
  [ "$fstype" = ramfs ] || die "the export is on $fstype, not ramfs"
  nbdsh -u "nbd+unix:///disk?socket=$SOCK" -c '
from proto import pattern, M
assert h.can_fast_zero(), "FAST_ZERO not advertised"
h.pwrite(pattern(0, 2 * M), 0)
for flags, what in ((nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_NO_HOLE, "FAST_ZERO|NO_HOLE"),
                    (nbd.CMD_FLAG_FAST_ZERO, "FAST_ZERO")):
    try:
        h.zero(M, M // 2, flags=flags)
        raise AssertionError(what + " on ramfs succeeded, expected ENOTSUP")
    except nbd.Error as e:
        assert e.errno == "ENOTSUP", "%s on ramfs: %s, expected ENOTSUP" % (what, e)
    assert h.pread(2 * M, 0) == pattern(0, 2 * M), what + " was refused, but the data changed"
    print("ok: %s on ramfs -> ENOTSUP, data unchanged" % what)
h.zero(M, M // 2, flags=nbd.CMD_FLAG_NO_HOLE)
assert h.pread(2 * M, 0) == pattern(0, M // 2) + bytes(M) + pattern(3 * M // 2, M // 2), \
    "WRITE_ZEROES NO_HOLE: not zeros within the range, or zeros outside it"
h.zero(3 * M + 24, 1000)
assert h.pread(4 * M, 0) == pattern(0, 1000) + bytes(4 * M - 1000), "WRITE_ZEROES: not zeros where asked"
' || die "FAST_ZERO on ramfs"
  stop_server
  pass "FAST_ZERO on ramfs -> ENOTSUP, data unchanged; without FAST_ZERO the zeros are written"
else
  echo "note: no user namespace with a ramfs here: the FAST_ZERO ENOTSUP case is skipped"
fi
echo "all passed"
