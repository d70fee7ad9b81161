"""The Python bindings (apps/libsluice/python/sluice.py) over the built libsluice.so.1,
on Debian's python3: copies verified byte for byte, progress by callback and by
iterator, a receiver, errors as exceptions, cancel. Argument: a scratch directory."""
import errno
import filecmp
import os
import socket
import sys
import threading
import time

import sluice

failures = 0


def check(condition, what):
    global failures
    if condition:
        print("ok:", what)
    else:
        print("FAIL:", what)
        failures += 1


scratch = sys.argv[1]
source = os.path.join(scratch, "py-source.img")
size = 8 << 20
with open(source, "wb") as f:
    f.write(os.urandom(size // 2))
    f.truncate(size)  # a hole in the second half
    f.seek(size - 4096)
    f.write(os.urandom(4096))

check(sluice.version() != "", "version " + sluice.version())

# A blocking copy with a progress callback.
copy = os.path.join(scratch, "py-copy.img")
seen = []
stats = sluice.copy(source, copy, depth=4, progress=seen.append)
check(filecmp.cmp(source, copy, shallow=False), "sluice.copy: the copy equals the source")
check(stats.image_size == size and stats.bytes_read > 0, "stats: %r" % (stats,))
check(seen and seen[-1].total == size and all(a.done <= b.done for a, b in zip(seen, seen[1:])),
      "progress callback: %d calls, never backwards" % len(seen))

# A receiver on a port it picks; the transfer started, followed by the iterator.
received = os.path.join(scratch, "py-received.img")
with sluice.Receiver(listen="tcp://127.0.0.1:0", output=received, size=size, once=True) as receiver:
    receiver.start()
    with sluice.Transfer(source, receiver.address) as transfer:
        transfer.start()
        updates = list(transfer.progress_updates(interval=0.01))
        transfer.wait()
    receiver.wait()
check(filecmp.cmp(source, received, shallow=False), "through a Receiver: the image equals the source")
check(updates and updates[-1].done == size, "progress_updates ends at the whole image: %r" % (updates[-1:],))

# Errors are exceptions carrying the errno and the cause.
try:
    sluice.copy(source, "bogus://x")
    check(False, "a bogus destination raised nothing")
except sluice.Error as e:
    check(e.code == errno.EINVAL and "unsupported destination" in e.message and e.offset is None,
          "bogus destination: %d %s" % (e.code, e.message))
try:
    sluice.copy(os.path.join(scratch, "missing.img"), copy)
    check(False, "a missing source raised nothing")
except sluice.Error as e:
    check(e.code == errno.ENOENT, "missing source: %d %s" % (e.code, e.message))
try:
    sluice.Receiver(listen="tcp://127.0.0.1:0", output="null:")
    check(False, "a null: receiver without a size raised nothing")
except sluice.Error as e:
    check(e.code == errno.EINVAL and "--size" in e.message, "receiver refused: %s" % e.message)

# Cancelled from another thread while a receiver that never reads holds it.
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
transfer = sluice.Transfer(source, "tcp://127.0.0.1:%d" % listener.getsockname()[1])
threading.Timer(0.3, transfer.cancel).start()
started = time.monotonic()
try:
    transfer.run()
    check(False, "a cancelled transfer succeeded")
except sluice.Error as e:
    check(e.code == errno.ECANCELED and time.monotonic() - started < 10, "cancel: %d %s" % (e.code, e.message))
transfer.close()
listener.close()

print("%d failure(s)" % failures)
sys.exit(1 if failures else 0)
