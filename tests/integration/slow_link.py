#!/usr/bin/env python3
"""slow_link.py LISTEN_SOCKET SERVER_SOCKET BYTES_PER_SECOND READY_FILE

A Unix-socket relay that passes bytes steadily but slowly in both directions, for
one connection: a link that is alive yet slower than the client's --timeout per
request. Small socket buffers keep the slowness visible to both ends."""
import os
import socket
import sys
import threading
import time

listen_path, server_path, rate, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
piece = 4096


def pump(src, dst):
    try:
        while True:
            data = src.recv(piece)
            if not data:
                break
            dst.sendall(data)
            time.sleep(len(data) / rate)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def small_buffers(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)


if os.path.exists(listen_path):
    os.unlink(listen_path)
listener = socket.socket(socket.AF_UNIX)
small_buffers(listener)
listener.bind(listen_path)
listener.listen(1)
with open(ready, "w") as f:
    f.write("ready")
client, _ = listener.accept()
small_buffers(client)
server = socket.socket(socket.AF_UNIX)
small_buffers(server)
server.connect(server_path)
threads = [threading.Thread(target=pump, args=(client, server)), threading.Thread(target=pump, args=(server, client))]
for t in threads:
    t.start()
for t in threads:
    t.join()
