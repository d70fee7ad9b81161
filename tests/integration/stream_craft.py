#!/usr/bin/python3
"""Crafts malformed Chunked streams and HTTP requests for the receiver tests.

  stream_craft.py HOST:PORT|/unix/path CASE

Cases: truncated, header-cut, garbage, oversize, unaligned, out-of-bounds,
dropped-mid-payload, after-terminator, non-put, transfer-encoding, http-garbage, good-http, lf-http, eager-http
(the request and the whole body in one write, so the receiver holds body bytes
behind the headers before it starts on the payload: 4 KiB of 0xAB at 0, 1 MiB of
0x5A at 1 MiB).
A good 4 KiB chunk of 0xAB at offset 0 comes first in every stream case, so a test
can check that data written before the error stays. HTTP cases print the status line.
"""
import socket
import struct
import sys


def chunk(offset, length, fill=b"\xab"):
    return struct.pack("<QI", offset, length) + fill * length


def connect(where):
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(where)
        return s
    host, _, port = where.rpartition(":")
    return socket.create_connection((host, int(port)))


def status_line(s):
    head = b""
    s.settimeout(10)
    while b"\r\n" not in head:
        data = s.recv(1)
        if not data:
            break
        head += data
    print(head.decode("latin-1").strip())


def wait_for_close(s):
    # The rest of the response head is still unread after status_line(): one recv
    # would return a byte of it at once, not wait for the receiver's close (which
    # follows its flush), and a test reading the output then raced the receiver.
    s.settimeout(30)
    while s.recv(65536):
        pass


def main():
    where, case = sys.argv[1], sys.argv[2]
    s = connect(where)
    good = chunk(0, 4096)
    if case == "truncated":
        s.sendall(good + chunk(4096, 512))
    elif case == "header-cut":
        s.sendall(good + b"\x00\x10\x00\x00\x00")
    elif case == "garbage":
        s.sendall(good + b"this is not a chunk header at all")
    elif case == "oversize":
        s.sendall(good + struct.pack("<QI", 0, 64 * 1024 * 1024))
    elif case == "unaligned":
        s.sendall(good + struct.pack("<QI", 8192, 1000) + b"\0" * 1000)
    elif case == "out-of-bounds":
        s.sendall(good + chunk(1 << 40, 512))
    elif case == "dropped-mid-payload":
        s.sendall(good + struct.pack("<QI", 1 << 20, 1 << 20) + b"\xcd" * 100000)
        # A reset, not a clean close: the peer vanished.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    elif case == "non-put":
        s.sendall(b"GET /import_raw_vdi HTTP/1.1\r\nhost: x\r\n\r\n")
        status_line(s)
    elif case == "transfer-encoding":
        s.sendall(b"PUT /import_raw_vdi HTTP/1.1\r\nhost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        status_line(s)
    elif case == "http-garbage":
        s.sendall(b"\x16\x03\x01 not http\r\n\r\n")
        status_line(s)
    elif case == "good-http":
        s.sendall(b"PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nhost: x\r\ncookie: chunked=true\r\n\r\n")
        status_line(s)
        s.sendall(good + b"\0" * 12)
        wait_for_close(s)
    elif case == "lf-http":
        # An empty line first and bare-LF line ends, which HTTP lets a server take;
        # 4 KiB of 0x77 at 4 KiB.
        s.sendall(b"\r\nPUT /import_raw_vdi?vdi=x HTTP/1.1\nhost: x\ncookie: chunked=true\n\n")
        status_line(s)
        s.sendall(chunk(4096, 4096, b"\x77") + b"\0" * 12)
        wait_for_close(s)
    elif case == "after-terminator":
        # A whole stream, then bytes behind its end marker.
        s.sendall(good + b"\0" * 12 + b"\x99" * 700)
        try:
            wait_for_close(s)
        except OSError:  # the receiver refuses the stream with a reset
            pass
    elif case == "eager-http":
        s.sendall(b"PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nhost: x\r\ncookie: chunked=true\r\n\r\n" + good +
                  chunk(1 << 20, 1 << 20, b"\x5a") + b"\0" * 12)
        status_line(s)
        while s.recv(65536):  # until the receiver closes: unread bytes would reset it
            pass
    else:
        sys.exit("unknown case " + case)
    s.close()


main()
