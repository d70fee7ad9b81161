#!/usr/bin/python3
"""Small TCP endpoints for checking the delay relay and the rig (standard library only).

  relay_probe.py echo --listen HOST:PORT [--ready-file F]
      echo every byte back on each connection; half-close when the client does
  relay_probe.py ping --connect HOST:PORT [--count N] [--size B]
      N request/reply round trips of B bytes; JSON with the RTTs in ms
  relay_probe.py bulk --connect HOST:PORT --bytes N
      send N random bytes, half-close, read the echo back; exit 1 unless every byte came
      back in order; JSON with the seconds taken
  relay_probe.py stamp --connect HOST:PORT [--count N] [--gap-ms G] [--end fin|reset]
      send N timestamps (CLOCK_MONOTONIC ns), G ms apart, to a `sink`; G ms after the
      last, close (a FIN) or abort (SO_LINGER 0: a reset)
  relay_probe.py sink --listen HOST:PORT [--ready-file F]
      receive timestamps from one connection; JSON with the one-way delays in ms, how the
      stream ended ("eof" or "reset") and when, in ms after the last timestamp was sent

CLOCK_MONOTONIC is one clock for every process on a host, so `stamp` and `sink` in
different network namespaces still measure one direction's delay.
"""

import argparse
import hashlib
import json
import os
import socket
import statistics
import struct
import sys
import threading
import time


def host_port(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


def listener(address, ready_file):
    server = socket.create_server(host_port(address), reuse_port=False)
    if ready_file:
        with open(ready_file + ".partial", "w") as f:
            f.write(f"{server.getsockname()[1]} {os.getpid()}\n")
        os.rename(ready_file + ".partial", ready_file)
    return server


def nodelay(sock):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock, n):
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed early")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def echo(args):
    server = listener(args.listen, args.ready_file)

    def serve(conn):
        with conn:
            nodelay(conn)
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    conn.shutdown(socket.SHUT_WR)
                    return
                conn.sendall(data)

    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def ping(args):
    payload = b"p" * args.size
    rtts = []
    with nodelay(socket.create_connection(host_port(args.connect), timeout=30)) as sock:
        for _ in range(args.count):
            start = time.monotonic_ns()
            sock.sendall(payload)
            recv_exactly(sock, len(payload))
            rtts.append((time.monotonic_ns() - start) / 1e6)
    print(json.dumps({"count": len(rtts), "min_ms": min(rtts), "median_ms": statistics.median(rtts),
                      "max_ms": max(rtts)}))


def bulk(args):
    data = os.urandom(args.bytes)
    sent_digest = hashlib.sha256(data).hexdigest()
    start = time.monotonic()
    with nodelay(socket.create_connection(host_port(args.connect), timeout=60)) as sock:
        def send():
            view = memoryview(data)
            for offset in range(0, len(view), 1 << 20):
                sock.sendall(view[offset:offset + (1 << 20)])
            sock.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        digest = hashlib.sha256()
        received = 0
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            received += len(chunk)
        sender.join()
    seconds = time.monotonic() - start
    ok = received == len(data) and digest.hexdigest() == sent_digest
    print(json.dumps({"bytes": len(data), "received": received, "match": ok, "seconds": seconds}))
    return 0 if ok else 1


def stamp(args):
    with nodelay(socket.create_connection(host_port(args.connect), timeout=30)) as sock:
        for _ in range(args.count):
            sock.sendall(struct.pack("!Q", time.monotonic_ns()))
            time.sleep(args.gap_ms / 1000)
        if args.end == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def sink(args):
    server = listener(args.listen, args.ready_file)
    conn, _ = server.accept()
    delays = []
    pending = b""
    last_sent = None
    with conn:
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                end = "reset"
                break
            now = time.monotonic_ns()
            if not chunk:
                end = "eof"
                break
            pending += chunk
            while len(pending) >= 8:
                (last_sent,) = struct.unpack("!Q", pending[:8])
                pending = pending[8:]
                delays.append((now - last_sent) / 1e6)
        ended = time.monotonic_ns()
    if not delays:
        print(json.dumps({"count": 0, "end": end}))
        return 1
    print(json.dumps({"count": len(delays), "min_ms": min(delays), "median_ms": statistics.median(delays),
                      "max_ms": max(delays), "end": end, "end_after_last_ms": (ended - last_sent) / 1e6}))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("echo")
    p.add_argument("--listen", required=True)
    p.add_argument("--ready-file")
    p = commands.add_parser("ping")
    p.add_argument("--connect", required=True)
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--size", type=int, default=64)
    p = commands.add_parser("bulk")
    p.add_argument("--connect", required=True)
    p.add_argument("--bytes", type=int, required=True)
    p = commands.add_parser("stamp")
    p.add_argument("--connect", required=True)
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--gap-ms", type=float, default=5)
    p.add_argument("--end", choices=("fin", "reset"), default="fin")
    p = commands.add_parser("sink")
    p.add_argument("--listen", required=True)
    p.add_argument("--ready-file")
    args = parser.parse_args()
    return globals()[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
