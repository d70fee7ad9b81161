#!/usr/bin/python3
"""An independent reference for xen-api's vhd-tool wire behaviour, written from
shared/docs/xapi-vhd-tool.md (sections 1, 2 and 7), not from Sluice's code, so Sluice
can be tested against something that is not itself.

  serve   receive one connection as `vhd-tool serve` does (raw destination, chunked or
          none source protocol), optionally behind xapi's HTTP import handshake.
  stream  send a raw image as `vhd-tool stream` does (chunked or none), optionally
          through the HTTP import handshake (http:// and https://).

Strict checks (--strict) assert the handshake bytes the document specifies, so a test
compares Sluice's bytes with the protocol's, not just the resulting image.
Exit status: 0 on success, 1 on any failure (with the reason on stderr).
"""

import argparse
import os
import socket
import ssl
import struct
import sys
import urllib.parse

SECTOR = 512
MAX_CHUNK = 2 * 1024 * 1024  # 4096 sectors
TERMINATOR = b"\0" * 12
XAPI_200 = (b"HTTP/1.1 200 OK\r\n"
            b"Connection: close\r\n"
            b"Cache-Control: no-cache, no-store\r\n"
            b"task-id: OpaqueRef:00000000-0000-0000-0000-000000000000\r\n"
            b"content-type: application/octet-stream\r\n"
            b"\r\n")


def die(message):
    sys.stderr.write("vhd_tool_reference: %s\n" % message)
    sys.exit(1)


def read_exactly(sock, n):
    parts = []
    while n > 0:
        data = sock.recv(min(n, 1 << 20))
        if not data:
            break
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


def read_head(sock):
    """Reads byte by byte up to CRLFCRLF, so nothing after the head is consumed."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            die("connection closed inside the HTTP head (%r)" % head)
        head += byte
        if len(head) > 65536:
            die("HTTP head too long")
    return head


def header_fields(head):
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip().lower(), value.strip())
    return lines[0], fields


# --- the receiving side (vhd-tool serve, xapi's /import_raw_vdi) ---------------------

def answer_http(sock, args):
    head = read_head(sock)
    if args.record_request:
        with open(args.record_request, "wb") as f:
            f.write(head)
    request_line, fields = header_fields(head)
    method = request_line.split(" ")[0]
    if "transfer-encoding" in fields:  # xapi answers any Transfer-Encoding with 404
        sock.sendall(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n")
        die("request carried Transfer-Encoding")
    if args.answer_status:
        sock.sendall(b"HTTP/1.1 " + args.answer_status.encode() + b"\r\nConnection: close\r\n\r\n")
        sys.exit(0)
    if args.answer_nbd:
        sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
                     b"Cache-Control: no-cache, no-store\r\nTransfer-encoding: nbd\r\n\r\n")
        if args.nbd_upstream:
            # xapi's /services/SM/nbdproxy: the same connection now carries NBD to a
            # local NBD server's Unix socket.
            relay_to_unix_socket(sock, args.nbd_upstream)
            sys.exit(0)
        # The NBD handshake would follow; wait for the client to give up.
        sock.settimeout(10)
        try:
            sock.recv(1)
        except OSError:
            pass
        sys.exit(0)
    if args.strict:
        # vhd-tool (cohttp): PUT, host, user-agent, the chunked cookie for Chunked
        # bodies, no Content-Length, no Transfer-Encoding, nothing else.
        if method != "PUT":
            die("method %r, not PUT" % method)
        if not request_line.endswith(" HTTP/1.1"):
            die("request line %r is not HTTP/1.1" % request_line)
        if "content-length" in fields:
            die("request carried Content-Length")
        expected_cookie = args.source_protocol == "chunked"
        if expected_cookie != (fields.get("cookie") == "chunked=true"):
            die("cookie %r does not match protocol %s" % (fields.get("cookie"), args.source_protocol))
        if "host" not in fields or "user-agent" not in fields:
            die("request lacks host or user-agent: %r" % head)
        allowed = {"host", "user-agent", "cookie", "authorization"}
        extra = set(fields) - allowed
        if extra:
            die("unexpected request headers %s" % sorted(extra))
        if args.expect_target and request_line.split(" ")[1] != args.expect_target:
            die("request target %r, expected %r" % (request_line.split(" ")[1], args.expect_target))
    if method != "PUT":
        sock.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
        die("method %r" % method)
    if args.answer_lenient:
        # What HTTP allows a server beyond xapi's own answer: an interim 100 Continue
        # first, and line ends of a bare LF (RFC 9112 section 2.2; cohttp reads them).
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" + XAPI_200.replace(b"\r\n", b"\n"))
        return
    sock.sendall(XAPI_200)


def relay_to_unix_socket(sock, path):
    import threading
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(path)

    def pump(src, dst):
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    back = threading.Thread(target=pump, args=(upstream, sock))
    back.start()
    pump(sock, upstream)
    back.join()


def serve_chunked(sock, fd, args):
    covered = []
    while True:
        header = read_exactly(sock, 12)
        if len(header) < 12:
            die("stream ended before the terminator")
        offset, length = struct.unpack("<QI", header)
        if offset == 0 and length == 0:  # vhd-tool's is_last_chunk: both fields zero
            sys.stderr.write("Received last chunk.\n")
            break
        # Vhd_format_lwt.IO.really_write asserts sector alignment of offset and length.
        if offset % SECTOR or length % SECTOR:
            die("unaligned chunk offset=%d length=%d" % (offset, length))
        if length >= 1 << 31:
            die("length %d does not fit a signed int32" % length)
        if args.strict and length > MAX_CHUNK:
            die("chunk of %d bytes is over 2 MiB" % length)
        k = 0
        while k < length:  # <= 2 MiB pieces into one reused buffer, pwrite each
            piece = read_exactly(sock, min(MAX_CHUNK, length - k))
            if len(piece) < min(MAX_CHUNK, length - k):
                die("stream ended inside a chunk at offset %d" % offset)
            os.pwrite(fd, piece, offset + k)
            k += len(piece)
        covered.append((offset, length))
    if args.expect_coverage is not None:
        # Without --prezeroed, a sender covers every sector of the padded image once.
        covered.sort()
        at = 0
        for offset, length in covered:
            if offset != at:
                die("chunks leave a gap or overlap at %d (next chunk at %d)" % (at, offset))
            at += length
        if at != args.expect_coverage:
            die("chunks cover %d bytes, expected %d" % (at, args.expect_coverage))
    if args.record_chunks:
        with open(args.record_chunks, "w") as f:
            for offset, length in covered:
                f.write("%d %d\n" % (offset, length))


def serve_none(sock, fd, args):
    size = args.destination_size if args.destination_size else os.fstat(fd).st_size
    if size == 0:
        die("destination size is 0")
    at = 0
    while at < size:
        piece = read_exactly(sock, min(MAX_CHUNK, size - at))
        if not piece:
            die("stream ended after %d of %d bytes" % (at, size))
        os.pwrite(fd, piece, at)
        at += len(piece)


def serve(args):
    if args.unix:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(args.unix):
            os.unlink(args.unix)
        listener.bind(args.unix)
    else:
        host, _, port = args.listen.rpartition(":")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
    listener.listen(1)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % (listener.getsockname()[1] if not args.unix else 0))
        os.rename(args.port_file + ".tmp", args.port_file)
    sock, _ = listener.accept()
    if args.tls_cert:
        # xapi's stunnel: TLS 1.2 in front of the plaintext import.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if args.tls12:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(args.tls_cert, args.tls_key)
        sock = context.wrap_socket(sock, server_side=True)
    if args.http:
        answer_http(sock, args)
    # File destinations: O_RDWR|O_CREAT, never O_TRUNC.
    fd = os.open(args.destination, os.O_RDWR | os.O_CREAT, 0o644)
    if args.destination_size and os.fstat(fd).st_size < args.destination_size:
        os.ftruncate(fd, args.destination_size)
    if args.source_protocol == "chunked":
        serve_chunked(sock, fd, args)
    else:
        serve_none(sock, fd, args)
    os.fsync(fd)
    os.close(fd)
    sock.close()


# --- the sending side (vhd-tool stream) ---------------------------------------------

def raw_elements(fd, size):
    """Section 4.3 raw -> raw: ('copy', start, n) and ('empty', start, n) in bytes,
    from SEEK_DATA/SEEK_HOLE over the size rounded up to a sector."""
    total = (size + SECTOR - 1) // SECTOR * SECTOR
    at = 0
    while at < total:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError:  # ENXIO inside a trailing hole: the rest is hole
            data = total
        data = total if data >= size else data // SECTOR * SECTOR
        if data > at:
            yield ("empty", at, data - at)
            at = data
            continue
        hole = os.lseek(fd, at, os.SEEK_HOLE)
        hole = min((hole + SECTOR - 1) // SECTOR * SECTOR, total)
        yield ("copy", at, hole - at)
        at = hole


def sectors(fd, size, prezeroed, split):
    """expand_empty (unless prezeroed) and expand_copy: ('sectors', offset, bytes)
    of at most 2 MiB, and ('empty', offset, n) when prezeroed."""
    zeros = b"\0" * MAX_CHUNK
    for kind, start, n in raw_elements(fd, size):
        end = start + n
        at = start
        while at < end:
            step = min(end - at, MAX_CHUNK) if split else end - at
            if kind == "empty":
                if prezeroed:
                    yield ("empty", at, end - at)
                    break
                yield ("sectors", at, zeros[:step])
            else:
                data = os.pread(fd, step, at)
                yield ("sectors", at, data + b"\0" * (step - len(data)))  # the padded last sector
            at += step


def connect(args, url):
    scheme = url.scheme
    if scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(url.path)
        return sock
    port = url.port or (443 if scheme == "https" else 80)
    sock = socket.create_connection((url.hostname, port))
    if scheme in ("https", "tls"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.maximum_version = ssl.TLSVersion.TLSv1_2  # vhd-tool's client is TLS 1.2 only
        if args.cafile:
            context.load_verify_locations(args.cafile)
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        sock = context.wrap_socket(sock, server_hostname=args.sni or url.hostname)
    return sock


def stream(args):
    url = urllib.parse.urlsplit(args.destination)
    sock = connect(args, url)
    if url.scheme in ("http", "https"):
        target = (url.path or "/") + ("?" + url.query if url.query else "")
        host = url.hostname + (":%d" % url.port if url.port else "")
        request = "PUT %s HTTP/1.1\r\nhost: %s\r\nuser-agent: ocaml-cohttp/reference\r\n" % (target, host)
        if args.destination_protocol == "chunked":
            request += "cookie: chunked=true\r\n"
        request += "\r\n"
        sock.sendall(request.encode())
        head = read_head(sock)
        if args.record_response:
            with open(args.record_response, "wb") as f:
                f.write(head)
        status_line, fields = header_fields(head)
        parts = status_line.split(" ")
        if len(parts) < 2 or not parts[1].startswith("2"):
            die("the server answered %r" % status_line)
        if fields.get("transfer-encoding", "").lower() == "nbd":
            die("the server wants NBD; the reference speaks only chunked and none")
    fd = os.open(args.source, os.O_RDONLY)
    size = os.fstat(fd).st_size
    if args.destination_protocol == "chunked":
        for kind, offset, payload in sectors(fd, size, args.prezeroed, True):
            if kind == "empty":
                continue  # only left when prezeroed
            sock.sendall(struct.pack("<QI", offset, len(payload)) + payload)
        sock.sendall(TERMINATOR)
    else:
        # "none": the image in order; Empty cannot be skipped on a socket.
        for kind, offset, payload in sectors(fd, size, False, True):
            sock.sendall(payload[: max(0, min(len(payload), size - offset))])
    sock.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", default="127.0.0.1:0")
    s.add_argument("--unix")
    s.add_argument("--port-file")
    s.add_argument("--source-protocol", choices=["chunked", "none"], default="chunked")
    s.add_argument("--http", action="store_true")
    s.add_argument("--destination", required=True)
    s.add_argument("--destination-size", type=int, default=0)
    s.add_argument("--tls-cert")
    s.add_argument("--tls-key")
    s.add_argument("--tls12", action="store_true")
    s.add_argument("--strict", action="store_true")
    s.add_argument("--expect-target")
    s.add_argument("--expect-coverage", type=int)
    s.add_argument("--record-request")
    s.add_argument("--record-chunks")
    s.add_argument("--answer-status")
    s.add_argument("--answer-nbd", action="store_true")
    s.add_argument("--answer-lenient", action="store_true",
                   help="answer 100 Continue, then 200 OK with bare-LF line ends")
    s.add_argument("--nbd-upstream", help="with --answer-nbd: relay the NBD session to this Unix socket")
    t = sub.add_parser("stream")
    t.add_argument("--source", required=True)
    t.add_argument("--destination", required=True)
    t.add_argument("--destination-protocol", choices=["chunked", "none"], default="chunked")
    t.add_argument("--prezeroed", action="store_true")
    t.add_argument("--cafile")
    t.add_argument("--sni")
    t.add_argument("--record-response")
    args = parser.parse_args()
    try:
        serve(args) if args.command == "serve" else stream(args)
    except (OSError, ssl.SSLError) as e:
        die(str(e))


if __name__ == "__main__":
    main()
