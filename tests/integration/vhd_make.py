#!/usr/bin/python3
"""Writes VHD test images, written from the format's description alone, with the raw
image each one must read as.

  vhd_make.py chain DIR [options]   base.vhd <- mid.vhd <- top.vhd (+ top.raw, mid.raw, base.raw)
  vhd_make.py dynamic OUT RAW [options]     one dynamic disk and its raw image
  vhd_make.py loop DIR              a.vhd and b.vhd, each the other's parent
  vhd_make.py corrupt KIND IN OUT   a damaged copy of a dynamic disk made here

Every level of a chain holds partial sector bitmaps: in each allocated block some
sectors are present and the others hold stale bytes that a reader must not return
(among them a clear bit right after a set bit in the same byte).
"""
import argparse
import os
import random
import shutil
import struct
import sys
import uuid

SECTOR = 512
MACX, W2KU, W2RU = 0x4D616358, 0x57326B75, 0x57327275


def checksum(data, at):
    total = sum(data[:at]) + sum(data[at + 4:])
    return (~total) & 0xFFFFFFFF


def geometry(size):
    """The CHS geometry of the VHD specification's algorithm."""
    sectors = min(size // SECTOR, 65535 * 16 * 255)
    if sectors >= 65535 * 16 * 63:
        spt, heads = 255, 16
        cth = sectors // spt
    else:
        spt = 17
        cth = sectors // spt
        heads = max((cth + 1023) // 1024, 4)
        if cth >= heads * 1024 or heads > 16:
            spt, heads = 31, 16
            cth = sectors // spt
        if cth >= heads * 1024:
            spt, heads = 63, 16
            cth = sectors // spt
    return cth // heads, heads, spt


def footer(size, disk_type, uid, data_offset, creator):
    f = bytearray(SECTOR)
    f[0:8] = b"conectix"
    struct.pack_into(">IIQI", f, 8, 2, 0x00010000, data_offset, 0)
    f[28:32] = creator
    struct.pack_into(">IIQQ", f, 32, 0x00010000, 0, size, size)
    c, h, s = geometry(size)
    struct.pack_into(">HBBI", f, 56, c, h, s, disk_type)
    f[68:84] = uid
    struct.pack_into(">I", f, 64, checksum(f, 64))
    return f


def locator_data(kind, parent_path, child_dir):
    """(platform code, bytes) naming the parent the way `kind` does."""
    rel = os.path.relpath(parent_path, child_dir)
    if kind == "macx":  # relative, as blktap writes it
        return MACX, ("file://./" + rel).encode()
    if kind == "macx-abs":
        return MACX, ("file://" + os.path.abspath(parent_path).replace(" ", "%20")).encode()
    if kind == "w2ru":
        return W2RU, (".\\" + rel.replace("/", "\\")).encode("utf-16-le")
    if kind == "w2ku":  # a drive-letter path: only its file name means anything here
        return W2KU, ("C:\\images\\" + os.path.basename(parent_path)).encode("utf-16-le")
    raise SystemExit("unknown locator kind " + kind)


class Disk:
    """A dynamic or differencing disk being laid out: footer copy, header, BAT,
    locator data, blocks, footer."""

    def __init__(self, size, block_size, creator=b"caml", parent=None, parent_name=None,
                 locators=(), uid=None):
        self.size, self.block_size, self.creator = size, block_size, creator
        self.uid = uid or uuid.uuid4().bytes
        self.parent, self.parent_name, self.locators = parent, parent_name, list(locators)
        self.blocks = {}  # block -> (bitmap bytearray, data bytearray)
        spb = block_size // SECTOR
        self.bitmap_bytes = -(-spb // (8 * SECTOR)) * SECTOR
        self.entries = -(-size // block_size)

    def write_sectors(self, sector, data):
        """Marks the sectors present and stores their bytes."""
        spb = self.block_size // SECTOR
        for i in range(len(data) // SECTOR):
            v = sector + i
            b, j = divmod(v, spb)
            self.allocate(b)
            bitmap, block = self.blocks[b]
            bitmap[j // 8] |= 0x80 >> (j % 8)
            block[j * SECTOR:(j + 1) * SECTOR] = data[i * SECTOR:(i + 1) * SECTOR]

    def allocate(self, block):
        """A block present in the BAT with nothing marked (its data is all stale)."""
        if block not in self.blocks:
            self.blocks[block] = (bytearray(self.bitmap_bytes), bytearray(os.urandom(self.block_size)))

    def serialize(self):
        table_bytes = -(-4 * self.entries // SECTOR) * SECTOR
        pos = 1536 + table_bytes
        header = bytearray(1024)
        header[0:8] = b"cxsparse"
        struct.pack_into(">QQIII", header, 8, 0xFFFFFFFFFFFFFFFF, 1536, 0x00010000, self.entries,
                         self.block_size)
        locator_bytes = bytearray()
        if self.parent is not None:
            header[40:56] = self.parent.uid
            name = self.parent_name if self.parent_name is not None else os.path.basename(self.parent_path)
            header[64:64 + 2 * len(name)] = name.encode("utf-16-be")
            for i, (code, data) in enumerate(self.locators):
                space = -(-len(data) // SECTOR) * SECTOR
                struct.pack_into(">IIIIQ", header, 576 + 24 * i, code, space // SECTOR, len(data), 0, pos)
                locator_bytes += data + bytes(space - len(data))
                pos += space
        struct.pack_into(">I", header, 36, checksum(header, 36))
        bat = [0xFFFFFFFF] * self.entries
        body = bytearray()
        for b in sorted(self.blocks, key=lambda _: random.random()):  # not in virtual order
            bat[b] = (pos + len(body)) // SECTOR
            bitmap, data = self.blocks[b]
            body += bitmap + data
        disk_type = 4 if self.parent is not None else 3
        foot = footer(self.size, disk_type, self.uid, 512, self.creator)
        table = struct.pack(">%dI" % self.entries, *bat) + b"\xff" * (table_bytes - 4 * self.entries)
        return foot + header + table + locator_bytes + body + foot

    def write(self, path):
        with open(path, "wb") as out:
            out.write(self.serialize())
        self.path = path


def fill_level(disk, below, rng, blocks_used, stale_blocks=1, whole_bytes=False):
    """Writes random sectors into some blocks of `disk` with partial bitmaps and
    applies them to `below` (the raw image seen through the chain so far)."""
    spb = disk.block_size // SECTOR
    for b in blocks_used:
        first = b * spb
        last = min(first + spb, -(-disk.size // SECTOR))
        # Runs of sectors, then single sectors with gaps: bit patterns such as 10 and
        # 0101 inside one byte.
        chosen = set()
        for _ in range(3):
            start = rng.randrange(first, last)
            chosen.update(range(start, min(last, start + rng.randrange(1, 40))))
        if not whole_bytes:
            for s in range(first, min(last, first + 16), 2):
                chosen.add(s)
        else:  # bitmaps whose bytes are all ones or all zeros
            chosen = {t for s in chosen for t in range(s // 8 * 8, s // 8 * 8 + 8) if first <= t < last}
        for s in sorted(chosen):
            data = os.urandom(SECTOR)
            disk.write_sectors(s, data)
            end = min((s + 1) * SECTOR, disk.size)
            below[s * SECTOR:end] = data[:end - s * SECTOR]
    for _ in range(stale_blocks):
        free = [b for b in range(disk.entries) if b not in disk.blocks]
        if free:
            disk.allocate(rng.choice(free))


def make_chain(args):
    rng = random.Random(args.seed)
    os.makedirs(args.dir, exist_ok=True)
    base_dir = args.base_dir or args.dir
    os.makedirs(base_dir, exist_ok=True)
    size, bs = args.size, args.block_size
    image = bytearray(size)
    names = [(base_dir, "base"), (args.dir, "mid"), (args.dir, "top")]
    parent = None
    n_blocks = -(-size // bs)
    for level, (d, name) in enumerate(names):
        path = os.path.join(d, name + ".vhd")
        locators = []
        parent_name = None
        if parent is not None:
            locators = [locator_data(k, parent.path, d) for k in args.locator]
            parent_name = "" if args.no_parent_name else None
        disk = Disk(size, bs, args.creator.encode(), parent, parent_name, locators)
        if parent is not None:
            disk.parent_path = parent.path
        # Every level touches the last (partial) block and a block of its own.
        used = {n_blocks - 1, level % n_blocks, rng.randrange(n_blocks)}
        fill_level(disk, image, rng, sorted(used), whole_bytes=args.whole_bytes)
        disk.write(path)
        with open(os.path.join(d, name + ".raw"), "wb") as out:
            out.write(image)
        parent = disk


def make_dynamic(args):
    rng = random.Random(args.seed)
    disk = Disk(args.size, args.block_size, args.creator.encode())
    image = bytearray(args.size)
    n_blocks = disk.entries
    blocks = sorted({0, n_blocks - 1, rng.randrange(n_blocks)})
    if not args.full_blocks:
        fill_level(disk, image, rng, blocks, stale_blocks=0, whole_bytes=args.whole_bytes)
    else:  # every sector of each block present, as qemu-img writes them
        for b in blocks:
            data = os.urandom(args.block_size)
            disk.write_sectors(b * args.block_size // SECTOR, data)
            end = min((b + 1) * args.block_size, args.size)
            image[b * args.block_size:end] = data[:end - b * args.block_size]
    disk.write(args.out)
    with open(args.raw, "wb") as out:
        out.write(image)


def make_loop(args):
    os.makedirs(args.dir, exist_ok=True)
    a_uid, b_uid = uuid.uuid4().bytes, uuid.uuid4().bytes
    a_path, b_path = os.path.join(args.dir, "a.vhd"), os.path.join(args.dir, "b.vhd")
    for path, uid, parent_path, parent_uid in ((a_path, a_uid, b_path, b_uid), (b_path, b_uid, a_path, a_uid)):
        parent = Disk(1 << 20, 1 << 20, uid=parent_uid)
        disk = Disk(1 << 20, 1 << 20, parent=parent, uid=uid,
                    locators=[locator_data("macx", parent_path, args.dir)])
        disk.parent_path = parent_path
        disk.write(path)


def corrupt(args):
    shutil.copyfile(args.input, args.out)
    with open(args.out, "r+b") as f:
        data = bytearray(f.read())
        size = len(data)
        tail = size - SECTOR
        entries, = struct.unpack_from(">I", data, 512 + 28)
        bat = [struct.unpack_from(">I", data, 1536 + 4 * i)[0] for i in range(entries)]
        present = [i for i, e in enumerate(bat) if e != 0xFFFFFFFF]

        def reseal_header():
            struct.pack_into(">I", data, 512 + 36, checksum(data[512:1536], 36))

        def set_bat(i, value):
            struct.pack_into(">I", data, 1536 + 4 * i, value)

        kind = args.kind
        if kind == "truncate":  # the tail (half a block and the footer) is gone
            del data[size - SECTOR - 4096:]
        elif kind == "cookie":
            data[tail:tail + 8] = b"conectiy"
        elif kind == "footer-checksum":
            data[tail + 100] ^= 0x01
        elif kind == "header-checksum":
            data[512 + 900] ^= 0x01
        elif kind == "bat-past-end":
            set_bat(present[0], size // SECTOR + 10)
        elif kind == "bat-overlap-block":
            by_place = sorted(present, key=lambda i: bat[i])  # the first block in the file, overlapped
            set_bat(by_place[1], bat[by_place[0]] + 1)
        elif kind == "bat-overlap-metadata":
            set_bat(present[0], 2)  # inside the header
        elif kind == "block-size":
            struct.pack_into(">I", data, 512 + 32, 3 << 20)
            reseal_header()
        elif kind == "table-size":
            struct.pack_into(">I", data, 512 + 28, 0x40000000)
            reseal_header()
        else:
            raise SystemExit("unknown corruption " + kind)
        f.seek(0)
        f.truncate()
        f.write(data)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("chain")
    c.add_argument("dir")
    c.add_argument("--base-dir", help="put base.vhd here instead")
    c.add_argument("--size", type=int, default=(6 << 20) + 7 * SECTOR)
    c.add_argument("--block-size", type=int, default=2 << 20)
    c.add_argument("--creator", default="caml")
    c.add_argument("--locator", action="append", default=[],
                   help="macx, macx-abs, w2ru, w2ku (repeatable; default macx)")
    c.add_argument("--no-parent-name", action="store_true",
                   help="leave the header's parent name empty, so only the locators can find it")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--whole-bytes", action="store_true", help="set and clear bitmap bits 8 at a time")
    d = sub.add_parser("dynamic")
    d.add_argument("out")
    d.add_argument("raw")
    d.add_argument("--size", type=int, default=(5 << 20) + 3 * SECTOR)
    d.add_argument("--block-size", type=int, default=2 << 20)
    d.add_argument("--creator", default="caml")
    d.add_argument("--full-blocks", action="store_true", help="blocks with every sector present")
    d.add_argument("--seed", type=int, default=2)
    d.add_argument("--whole-bytes", action="store_true", help="set and clear bitmap bits 8 at a time")
    lp = sub.add_parser("loop")
    lp.add_argument("dir")
    k = sub.add_parser("corrupt")
    k.add_argument("kind")
    k.add_argument("input")
    k.add_argument("out")
    args = p.parse_args()
    if args.command == "chain":
        if not args.locator:
            args.locator = ["macx"]
        make_chain(args)
    elif args.command == "dynamic":
        make_dynamic(args)
    elif args.command == "loop":
        make_loop(args)
    else:
        corrupt(args)


if __name__ == "__main__":
    sys.exit(main())
