#!/usr/bin/python3
"""A deliberately plain NBD writer for checking the benchmark rig, not a peer.

  nbd_reference_writer.py --connect HOST:PORT --image FILE [--export NAME]
                          [--depth N] [--nodelay] [--write-size BYTES]

It writes FILE to offset 0 of the export in 2 MiB NBD_CMD_WRITE requests, at most
--depth in flight, then disconnects. Each request is a 28-byte header write() followed by
the payload in --write-size pieces (default: one write), with Nagle's algorithm on
unless --nodelay. --write-size 16413 reproduces the shape the field report measured:
vhd-tool's unbuffered TLS channel, one 16 KiB record (16,413 bytes) per write.

The rig uses it (run-matrix.sh --groups reference) to show that it reproduces the
field's effect before any Sluice arm exists: with record-sized writes, arm A (depth 1,
Nagle) stalls and arm C (depth 8, NODELAY) does not. Fixed newstyle handshake with
NBD_OPT_EXPORT_NAME; no structured replies; standard library only.
"""

import argparse
import socket
import struct
import sys
import threading

REQUEST_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698
NBD_CMD_WRITE = 1
NBD_CMD_DISC = 2
OPTION_MAGIC = 0x49484156454F5054  # "IHAVEOPT"
NBD_OPT_EXPORT_NAME = 1
FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2
REQUEST_SIZE = 2 << 20


def receive(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return bytes(data)


def handshake(sock, export):
    if receive(sock, 16) != b"NBDMAGICIHAVEOPT":
        raise ConnectionError("not a newstyle NBD server")
    (server_flags,) = struct.unpack("!H", receive(sock, 2))
    client_flags = FLAG_FIXED_NEWSTYLE | (server_flags & FLAG_NO_ZEROES)
    sock.sendall(struct.pack("!I", client_flags))
    name = export.encode()
    sock.sendall(struct.pack("!QII", OPTION_MAGIC, NBD_OPT_EXPORT_NAME, len(name)) + name)
    size, _ = struct.unpack("!QH", receive(sock, 10))
    if not server_flags & FLAG_NO_ZEROES:
        receive(sock, 124)
    return size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--export", default="")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--nodelay", action="store_true")
    parser.add_argument("--write-size", type=int, default=REQUEST_SIZE)
    args = parser.parse_args()

    host, _, port = args.connect.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=600)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if args.nodelay else 0)
    size = handshake(sock, args.export)
    with open(args.image, "rb") as f:
        image = memoryview(f.read())
    if len(image) > size:
        sys.exit(f"nbd_reference_writer: image ({len(image)} bytes) larger than the export ({size})")

    requests = [(offset, min(REQUEST_SIZE, len(image) - offset)) for offset in range(0, len(image), REQUEST_SIZE)]
    credits = threading.Semaphore(args.depth)
    failure = []

    def read_replies():
        try:
            for _ in requests:
                magic, error, _ = struct.unpack("!IIQ", receive(sock, 16))
                if magic != REPLY_MAGIC or error:
                    raise ConnectionError(f"bad reply: magic {magic:#x}, error {error}")
                credits.release()
        except Exception as e:  # reported by the main thread
            failure.append(e)
            for _ in range(args.depth):
                credits.release()

    reader = threading.Thread(target=read_replies)
    reader.start()
    for handle, (offset, length) in enumerate(requests):
        credits.acquire()
        if failure:
            break
        sock.sendall(struct.pack("!IHHQQI", REQUEST_MAGIC, 0, NBD_CMD_WRITE, handle, offset, length))
        for piece in range(offset, offset + length, args.write_size):
            sock.sendall(image[piece:min(piece + args.write_size, offset + length)])
    reader.join()
    if failure:
        sys.exit(f"nbd_reference_writer: {failure[0]}")
    sock.sendall(struct.pack("!IHHQQI", REQUEST_MAGIC, 0, NBD_CMD_DISC, len(requests), 0, 0))
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
