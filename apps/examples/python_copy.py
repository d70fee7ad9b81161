#!/usr/bin/python3
"""Copy a disk image from Python through Sluice's C ABI, with a progress line and a
SHA-256 comparison of both ends at the end.

    python_copy.py SOURCE DESTINATION    (DESTINATION a local path, to be compared)
"""
import hashlib
import sys

import sluice


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, destination = sys.argv[1:]
    with sluice.Transfer(source, destination) as transfer:
        transfer.start()
        for p in transfer.progress_updates(interval=0.5):
            percent = 100 * p.done // p.total if p.total else 100
            print("\r%3d%% %d of %d bytes" % (percent, p.done, p.total), end="", file=sys.stderr)
        try:
            stats = transfer.wait()
        except sluice.Error as e:
            print("\nfailed%s: %s" % ("" if e.offset is None else " at offset %d" % e.offset, e.message),
                  file=sys.stderr)
            return 1
    print("\ncopied %d bytes in %.2f s" % (stats.image_size, stats.seconds), file=sys.stderr)
    if digest(source) != digest(destination):
        print("the destination differs from the source", file=sys.stderr)
        return 1
    print("verified: SHA-256 equal on both ends", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
