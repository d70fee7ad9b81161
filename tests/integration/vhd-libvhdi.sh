#!/bin/bash
# VHDs read by sluice and by Debian's libvhdi (python3-libvhdi), an independent reader.
# libvhdi is right about fixed and dynamic disks and about chains whose bitmaps are
# whole bytes of ones or zeros; it tests a bitmap bit as (byte >> (7 - i)) != 0, so a
# clear bit after a set one in the same byte reads as present. Where it is right, it
# must agree with sluice and with vhd_make.py's raw image; where it is wrong, this
# test shows that it is, and that sluice is not. Like sluice, it refuses a parent whose
# unique id is not the one the child names.
. "$(dirname "$0")/functions.sh"

requires qemu-img
"$PYTHON" -c 'import pyvhdi' 2>/dev/null || skip "python3-libvhdi is not installed (tests/setup-debian.sh installs it)"
cd "$scratch"
make_vhd() { "$PYTHON" "$tests_dir/vhd_make.py" "$@" || fail "vhd_make.py $* failed"; }

# libvhdi_read OUT VHD [PARENT...]: the virtual disk as libvhdi reads it.
libvhdi_read() {
  "$PYTHON" - "$@" <<'EOF' || fail "libvhdi could not read $2"
import pyvhdi, sys
out, paths = sys.argv[1], sys.argv[2:]
files = []
for path in paths:
    f = pyvhdi.file()
    f.open(path)
    if files:
        files[-1].set_parent(f)
    files.append(f)
size = files[0].get_media_size()
with open(out, "wb") as o:
    o.write(files[0].read_buffer_at_offset(size, 0))
EOF
}

sluice_read() {
  rm -f "$1"
  expect_ok "$SLUICE" copy "$2" "$1"
}

# differing_sectors A B: how many 512-byte sectors differ.
differing_sectors() {
  "$PYTHON" -c '
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
print(sum(a[i:i + 512] != b[i:i + 512] for i in range(0, max(len(a), len(b)), 512)))' "$1" "$2"
}

log "qemu-img's dynamic and fixed VHDs: libvhdi, qemu-img and sluice agree"
truncate -s 9M data.raw
head -c 1M /dev/urandom | dd of=data.raw bs=1M seek=2 conv=notrunc status=none
head -c 300K /dev/urandom | dd of=data.raw bs=1K seek=8000 conv=notrunc status=none
qemu-img convert -f raw -O vpc data.raw dyn.vhd
qemu-img convert -f raw -O vpc -o subformat=fixed data.raw fixed.vhd
for image in dyn fixed; do
  qemu-img convert -f vpc -O raw "$image.vhd" "$image.qemu"
  libvhdi_read "$image.libvhdi" "$image.vhd"
  sluice_read "$image.sluice" "$image.vhd"
  same_content "$image.qemu" "$image.libvhdi"
  same_content "$image.qemu" "$image.sluice"
done

log "vhd_make.py's images with whole-byte bitmaps: libvhdi, the generator and sluice agree"
make_vhd dynamic caml.vhd caml.raw --whole-bytes --size $((5 * 1024 * 1024 + 3 * 512))
libvhdi_read caml.libvhdi caml.vhd
same_content caml.raw caml.libvhdi  # libvhdi sizes a caml VHD by its current size, too
sluice_read caml.sluice caml.vhd
same_content caml.raw caml.sluice
make_vhd chain whole --whole-bytes --locator macx --locator w2ru --seed 21
libvhdi_read whole.libvhdi whole/top.vhd whole/mid.vhd whole/base.vhd
same_content whole/top.raw whole.libvhdi
sluice_read whole.sluice whole/top.vhd
same_content whole/top.raw whole.sluice

log "partial bytes of bitmap: libvhdi returns stale sectors, sluice does not"
make_vhd chain partial --seed 22
libvhdi_read partial.libvhdi partial/top.vhd partial/mid.vhd partial/base.vhd
sluice_read partial.sluice partial/top.vhd
same_content partial/top.raw partial.sluice
wrong=$(differing_sectors partial/top.raw partial.libvhdi)
((wrong > 0)) || fail "libvhdi read the partial bitmaps right: its bitmap bug is fixed; update docs/formats/vhd.md"
log "libvhdi gets $wrong sectors of partial/top.vhd wrong (its bitmap test)"
libvhdi_read partial-base.libvhdi partial/base.vhd
wrong=$(differing_sectors partial/base.raw partial-base.libvhdi)
((wrong > 0)) || fail "libvhdi read the dynamic base's partial bitmaps right"
log "and $wrong sectors of the dynamic partial/base.vhd"

log "a parent with another unique id: libvhdi's set_parent and sluice both refuse it"
make_vhd chain other --seed 23
make_vhd chain impostor --seed 23
if "$PYTHON" -c '
import pyvhdi, sys
mid, base = pyvhdi.file(), pyvhdi.file()
mid.open(sys.argv[1])
base.open(sys.argv[2])
mid.set_parent(base)' other/mid.vhd impostor/base.vhd 2>libvhdi.err; then
  fail "libvhdi took a parent with another unique id"
fi
grep -q "mismatch in identifier" libvhdi.err || fail "libvhdi refused the impostor for another reason: $(cat libvhdi.err)"
cp impostor/base.vhd other/base.vhd
expect_fail 1 "other/mid.vhd: dynamic header at offset 512: the parent must have unique id" \
  "$SLUICE" copy other/top.vhd never.raw
[[ ! -e never.raw ]] || fail "a refused chain created its destination"

log "ok"
