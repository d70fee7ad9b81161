#!/bin/bash
# VHD sources: fixed and dynamic disks qemu-img wrote, read to every kind of
# destination and compared with qemu-img's own raw conversion; differencing chains
# from vhd_make.py (three levels, partial bitmaps at each, every locator kind, the
# --vhd-path search, the `caml` creator, sizes that are no multiple of the block)
# compared with the raw image the generator says they hold; every bad input refused
# with its message, exit 1 and the destination untouched; `sluice info`.
. "$(dirname "$0")/nbd-functions.sh"

requires qemu-img nbdkit nbdcopy
requires_nbdkit_plugin memory
cd "$scratch"
make_vhd() { "$PYTHON" "$tests_dir/vhd_make.py" "$@" || fail "vhd_make.py $* failed"; }

# copy_and_compare SOURCE EXPECTED [SLUICE-OPTIONS...]: SOURCE copied to a file reads
# exactly as EXPECTED (same bytes, same length).
copy_and_compare() {
  local source=$1 expected=$2
  shift 2
  rm -f out.raw
  expect_ok "$SLUICE" copy "$@" "$source" out.raw
  same_content "$expected" out.raw
}

# --- qemu-img's images --------------------------------------------------------------
log "qemu-img dynamic and fixed VHDs against qemu-img's raw conversion"
sparse_image data.raw 9M 0 1M 3M 512K 5M 2M 8M 300K
qemu-img convert -f raw -O vpc data.raw dyn.vhd
qemu-img convert -f raw -O vpc -o subformat=fixed data.raw fixed.vhd
qemu-img convert -f vpc -O raw dyn.vhd dyn.ref
qemu-img convert -f vpc -O raw fixed.vhd fixed.ref
size=$(size_of dyn.ref)
for image in dyn fixed; do
  copy_and_compare "$image.vhd" "$image.ref"
  # The data is the image's, not zeros: qemu's reading agrees with what was written.
  cmp -n "$(size_of data.raw)" data.raw out.raw || fail "$image.vhd does not hold data.raw"
  copy_and_compare "$image.vhd" "$image.ref" --source-format vhd
  expect_ok "$SLUICE" copy "$image.vhd" null:
done
# A fixed VHD forced raw is the whole file, footer and all (qemu-img -f raw reads it so).
copy_and_compare fixed.vhd fixed.vhd --source-format raw
# The dynamic VHD forced raw is its container bytes.
copy_and_compare dyn.vhd dyn.vhd --source-format raw

log "qemu-img's VHDs to an NBD export (nbdkit memory)"
for image in dyn fixed; do
  nbdkit_unix "mem-$image" memory "$size"
  expect_ok "$SLUICE" copy "$image.vhd" "$uri"
  read_export "$uri" "got-$image.raw"
  same_content "$image.ref" "got-$image.raw"
done

log "qemu-img's dynamic VHD to sluice serve (Chunked)"
port=$(free_port)
"$SLUICE" serve --listen "tcp://127.0.0.1:$port" --output served.raw --size "$size" --once 2>serve.log &
serve_pid=$!
on_exit "kill $serve_pid"
wait_listening "tcp://127.0.0.1:$port" "$serve_pid" || fail "sluice serve did not listen: $(cat serve.log)"
expect_ok "$SLUICE" copy dyn.vhd "tcp://127.0.0.1:$port"
wait "$serve_pid" || fail "sluice serve exited $?: $(cat serve.log)"
same_content dyn.ref served.raw

# --- the generator's chains -------------------------------------------------------------
# Each locator kind alone finds the parents: the header's parent name is left empty.
for locator in macx macx-abs w2ru w2ku; do
  log "a three-level chain found through $locator locators"
  base_dir=chain-$locator
  [[ $locator == macx-abs ]] && base_dir=elsewhere-$locator  # only the absolute path leads there
  make_vhd chain "chain-$locator" --locator "$locator" --no-parent-name --base-dir "$base_dir" --seed 7
  copy_and_compare "chain-$locator/top.vhd" "chain-$locator/top.raw"
  copy_and_compare "chain-$locator/mid.vhd" "chain-$locator/mid.raw"
  copy_and_compare "$base_dir/base.vhd" "$base_dir/base.raw"
done

log "the parent name alone, and every locator at once"
make_vhd chain chain-name --locator w2ku --seed 8  # w2ku names C:\images\..., useless here
copy_and_compare chain-name/top.vhd chain-name/top.raw
make_vhd chain chain-all --locator w2ku --locator w2ru --locator macx --locator macx-abs --seed 9
copy_and_compare chain-all/top.vhd chain-all/top.raw

log "--vhd-path: a parent moved to another directory"
make_vhd chain chain-moved --no-parent-name --seed 10
mkdir -p store1 store2
mv chain-moved/base.vhd store2/
expect_fail 1 "chain-moved/mid.vhd: dynamic header at offset 512: the parent (unique id" \
  "$SLUICE" copy chain-moved/top.vhd out.raw
[[ $err == *"is missing; looked for chain-moved/base.vhd"* ]] || fail "the missing parent's paths: $err"
copy_and_compare chain-moved/top.vhd chain-moved/top.raw --vhd-path store1 --vhd-path store2

log "odd sizes and small blocks: 64 KiB blocks, a size that is no multiple of them"
make_vhd chain chain-small --block-size 65536 --size $((1024 * 1024 + 3 * 512)) --seed 11
copy_and_compare chain-small/top.vhd chain-small/top.raw
make_vhd chain chain-512 --block-size 512 --size $((64 * 1024 + 512)) --seed 12
copy_and_compare chain-512/top.vhd chain-512/top.raw
make_vhd chain chain-big-block --block-size $((8 * 1024 * 1024)) --size $((9 * 1024 * 1024 + 512)) --seed 13
copy_and_compare chain-big-block/top.vhd chain-big-block/top.raw

log "a chain to every destination"
chain=chain-macx/top.vhd expected=chain-macx/top.raw
csize=$(size_of "$expected")
nbdkit_unix mem-chain memory "$csize"
expect_ok "$SLUICE" copy "$chain" "$uri"
read_export "$uri" got-chain.raw
same_content "$expected" got-chain.raw
expect_ok "$SLUICE" copy "$chain" null:
port=$(free_port)
"$SLUICE" serve --listen "tcp://127.0.0.1:$port" --output served-chain.raw --size "$csize" --once 2>serve.log &
serve_pid=$!
on_exit "kill $serve_pid"
wait_listening "tcp://127.0.0.1:$port" "$serve_pid" || fail "sluice serve did not listen: $(cat serve.log)"
expect_ok "$SLUICE" copy "$chain" "tcp://127.0.0.1:$port"
wait "$serve_pid" || fail "sluice serve exited $?: $(cat serve.log)"
same_content "$expected" served-chain.raw

log "the caml creator: qemu-img sizes it by its geometry, sluice by its current size"
# Full blocks: qemu reads an allocated block whole, whatever its bitmap says.
make_vhd dynamic caml.vhd caml.raw --size $((5 * 1024 * 1024 + 3 * 512)) --full-blocks
copy_and_compare caml.vhd caml.raw
qemu-img convert -f vpc -O raw caml.vhd caml-qemu.raw
qemu_size=$(size_of caml-qemu.raw)
((qemu_size < $(size_of caml.raw))) && log "qemu-img reads $qemu_size of $(size_of caml.raw) bytes (its geometry rule)"
cmp -n "$qemu_size" caml.raw caml-qemu.raw || fail "qemu-img and sluice disagree on caml.vhd's first $qemu_size bytes"
qemu-img convert --image-opts "driver=vpc,force_size_calc=current_size,file.filename=caml.vhd" -O raw caml-exact.raw
same_content caml.raw caml-exact.raw

# --- the extent map and sluice info ----------------------------------------------------
log "sluice info: type, creator, block size, allocated blocks, chain"
expect_ok "$SLUICE" info --json chain-macx/top.vhd
"$PYTHON" - "$out" "$scratch" <<'EOF' || fail "info --json chain-macx/top.vhd is wrong: $out"
import json, sys
got, scratch = json.loads(sys.argv[1]), sys.argv[2]
assert got["format"] == "vhd" and got["size"] == 6 * 2**20 + 7 * 512, got
vhd = got["vhd"]
assert vhd["type"] == "differencing" and vhd["creator"] == "caml" and vhd["block_size"] == 2**21, vhd
assert vhd["blocks"] == 4, vhd
chain = vhd["chain"]
assert chain[0]["path"] == "chain-macx/top.vhd", chain
assert [c["type"] for c in chain] == ["differencing", "differencing", "dynamic"], chain
assert chain[1]["path"].endswith("mid.vhd") and chain[2]["path"].endswith("base.vhd"), chain
assert all(c["allocated_blocks"] >= 1 and c["blocks"] == 4 for c in chain), chain
# The extent map: data where some member holds a block, a hole where none does.
assert sum(e["length"] for e in got["extents"]) == got["size"], got["extents"]
EOF
expect_ok "$SLUICE" info chain-macx/top.vhd
for line in "format:    vhd" "vhd type:  differencing" "creator:   'caml'" "block size: 2097152" \
  "chain:     3 files"; do
  [[ $out == *"$line"* ]] || fail "sluice info lacks '$line': $out"
done
expect_ok "$SLUICE" info --json fixed.vhd
[[ $(json_field "$out" vhd) == *"'type': 'fixed'"* ]] || fail "info on a fixed VHD: $out"
# A dynamic VHD whose blocks are all absent is one hole.
qemu-img create -q -f vpc empty.vhd 64M
expect_ok "$SLUICE" info --json empty.vhd
"$PYTHON" -c '
import json, sys
got = json.loads(sys.argv[1])
assert got["allocated"] == 0 and len(got["extents"]) == 1 and got["extents"][0]["type"] == "hole", got
assert got["vhd"]["allocated_blocks"] == 0, got' "$out" || fail "info on an empty VHD: $out"

# --- bad input -------------------------------------------------------------------------
# Each is refused before anything is written: the destination file never appears, and
# an NBD export keeps its bytes.
make_vhd dynamic good.vhd good.raw --seed 3
copy_and_compare good.vhd good.raw

# refused EXPECTED-MESSAGE SOURCE [SLUICE-OPTIONS...]
refused() {
  local message=$1 source=$2
  shift 2
  rm -f never.raw
  expect_fail 1 "$message" "$SLUICE" copy "$@" "$source" never.raw
  [[ ! -e never.raw ]] || fail "a refused $source created its destination"
  [[ $(grep -c . <<<"$err") -eq 1 ]] || fail "more than one line of error for $source: $err"
}

good_size=$(size_of good.vhd)
for kind in truncate cookie footer-checksum header-checksum bat-past-end bat-overlap-block bat-overlap-metadata \
  block-size table-size; do
  make_vhd corrupt "$kind" good.vhd "bad-$kind.vhd"
done
refused "bad-truncate.vhd: VHD footer at offset $((good_size - 4608 - 512)): the cookie is" bad-truncate.vhd
[[ $err == *"(the footer's copy at offset 0 is intact: a truncated or damaged file)"* ]] || fail "truncate: $err"
refused "bad-cookie.vhd: VHD footer at offset $((good_size - 512)): the cookie is 'conectiy', not 'conectix'" \
  bad-cookie.vhd
refused "bad-footer-checksum.vhd: VHD footer at offset $((good_size - 512)): the checksum is" bad-footer-checksum.vhd
refused "bad-header-checksum.vhd: dynamic header at offset 512: the checksum is" bad-header-checksum.vhd
refused "bad-bat-past-end.vhd: BAT entry 0 (at offset 1536) puts its block at offset $(((good_size / 512 + 10) * 512))" \
  bad-bat-past-end.vhd
[[ $err == *"past the end of the data at $((good_size - 512)) (truncated file?)"* ]] || fail "bat-past-end: $err"
refused "bad-bat-overlap-block.vhd: BAT entry" bad-bat-overlap-block.vhd
[[ $err == *", overlapping block "* ]] || fail "bat-overlap-block: $err"
refused "bad-bat-overlap-metadata.vhd: BAT entry 0 (at offset 1536) puts its block at offset 1024, overlapping the dynamic header at offset 512" \
  bad-bat-overlap-metadata.vhd
refused "bad-block-size.vhd: dynamic header at offset 512: the block size 3145728 is not a power of two" \
  bad-block-size.vhd
refused "bad-table-size.vhd: BAT at offset 1536: its 1073741824 entries (4294967296 bytes) do not fit before the footer" \
  bad-table-size.vhd
# A raw file forced to be read as a VHD.
refused "data.raw: VHD footer at offset $((9 * 1024 * 1024 - 512)): the cookie is" data.raw --source-format vhd
# Too short to hold a footer.
head -c 100 good.vhd >tiny.vhd
refused "tiny.vhd: 100 bytes is too short for a VHD: its footer alone is 512 bytes" tiny.vhd --source-format vhd

log "bad chains: a loop, a missing parent, a parent with another unique id"
make_vhd loop loop
refused "loop/b.vhd: the chain loops: its parent loop/a.vhd is already in the chain" loop/a.vhd
make_vhd chain chain-gone --seed 14
rm chain-gone/base.vhd
refused "chain-gone/mid.vhd: dynamic header at offset 512: the parent 'base.vhd' (unique id" chain-gone/top.vhd
[[ $err == *"is missing; looked for chain-gone/base.vhd" ]] || fail "missing parent: $err"
make_vhd chain chain-other --seed 15
make_vhd chain chain-impostor --seed 15
cp chain-impostor/base.vhd chain-other/base.vhd
refused "chain-other/mid.vhd: dynamic header at offset 512: the parent must have unique id" chain-other/top.vhd
[[ $err == *"but chain-other/base.vhd has unique id "* ]] || fail "mismatched parent: $err"

log "a refused source leaves an NBD export's bytes as they were"
head -c 1M /dev/urandom >before.raw
nbdkit_unix mem-keep memory 1M
nbdcopy before.raw "$uri"
expect_fail 1 "bad-header-checksum.vhd: dynamic header at offset 512: the checksum is" \
  "$SLUICE" copy bad-header-checksum.vhd "$uri"
read_export "$uri" after.raw
same_content before.raw after.raw

log "--source-format and --vhd-path are checked"
expect_fail 2 "--source-format must be auto, raw or vhd" "$SLUICE" copy --source-format qcow2 dyn.vhd null:
expect_fail 2 "--source-format vhd reads local files and block devices only" \
  "$SLUICE" copy --source-format vhd "nbd+unix:///?socket=$scratch/none.sock" null:

log "ok"
