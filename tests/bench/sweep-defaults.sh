#!/bin/bash
# Measures what Sluice's defaults should be: request depth x request size, and the
# zero-detection granularity (--sparse), for local copies (file -> file with flush,
# file -> null:) and, when nbdkit is installed, file -> NBD over loopback TCP.
# Not a test: it prints medians and writes docs/benchmarks.md's sweep section (or
# --output FILE's); --quick and --no-docs only print, unless --output is given.
#
#   tests/bench/sweep-defaults.sh [--runs N] [--size SIZE] [--dir DIR] [--quick]
#                                 [--output FILE] [--no-docs] [--sparse-only]
#
# --sparse-only measures only the zero-detection granularity (the quickest part) and
# writes it as its own section, sweep-sparse.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
sluice=${SLUICE:-$root/build/apps/sluice/sluice}
runs=3
size=2G
dir=/var/tmp/sluice-sweep
quick=0
doc=
no_docs=0
sparse_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --quick) quick=1; runs=1; size=256M; shift ;;
    --output) doc=$2; shift 2 ;;
    --no-docs) no_docs=1; shift ;;
    --sparse-only) sparse_only=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
# A quick run is a smoke test: its numbers go into a doc only when one is named.
if [ "$no_docs" = 1 ]; then
  doc=
elif [ -z "$doc" ] && [ "$quick" = 0 ]; then
  doc=$root/docs/benchmarks.md
fi
[ -x "$sluice" ] || { echo "build sluice first ($sluice)" >&2; exit 1; }
mkdir -p "$dir"
src=$dir/random.img
zeroish=$dir/zeroish.img
# A filesystem image's way: a quarter of its 4 KiB blocks zero, scattered singly.
scattered=$dir/scattered-zeros.img
cleanup() {
  rm -f "$dir"/out.img
  [ -n "${nbdkit_pid:-}" ] && kill "$nbdkit_pid" 2>/dev/null || true
}
trap cleanup EXIT

bytes=$(numfmt --from=iec "$size")
if [ ! -f "$src" ] || [ "$(stat -c %s "$src")" != "$bytes" ]; then
  head -c "$bytes" /dev/urandom > "$src"
fi
# Half random, half allocated zeros in 1 MiB stripes: what zero detection is for.
if [ ! -f "$zeroish" ] || [ "$(stat -c %s "$zeroish")" != "$bytes" ]; then
  /usr/bin/python3 - "$src" "$zeroish" "$bytes" <<'PY'
import sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
mib = 1 << 20
with open(src, 'rb') as s, open(dst, 'wb') as d:
    for i in range(n // mib):
        chunk = s.read(mib)
        d.write(chunk if i % 2 == 0 else bytes(mib))
PY
fi
if [ ! -f "$scattered" ] || [ "$(stat -c %s "$scattered")" != "$bytes" ]; then
  /usr/bin/python3 - "$src" "$scattered" "$bytes" <<'PY'
import random, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(4096)
mib, block = 1 << 20, 4096
with open(src, 'rb') as s, open(dst, 'wb') as d:
    for _ in range(n // mib):
        chunk = bytearray(s.read(mib))
        for b in range(0, mib, block):
            if rng.random() < 0.25:
                chunk[b:b + block] = bytes(block)
        d.write(chunk)
PY
fi
cat "$src" "$zeroish" "$scattered" > /dev/null   # warm the cache

# median of the seconds printed by --stats over $runs runs
median_seconds() {
  local times=()
  for _ in $(seq "$runs"); do
    rm -f "$dir/out.img"
    local t
    # Explicit returns: errexit does not apply when the caller tests this function.
    t=$("$sluice" copy --stats "$@" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])') || return 1
    [ -n "$t" ] || return 1
    times+=("$t")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

mib_per_s() { /usr/bin/python3 -c "print(f'{$bytes/1048576/$1:,.0f}')"; }

depths=(1 2 4 8 16 32)
sizes=(256k 1M 2M 4M 8M)
if [ "$quick" = 1 ]; then depths=(1 8 32); sizes=(256k 2M); fi

table=""
row() { table+="$*"$'\n'; echo "$*"; }

if [ "$sparse_only" = 0 ]; then
row "| route | request size | $(printf 'depth %s | ' "${depths[@]}")"
row "|---|---|$(printf -- '--:|%.0s' "${depths[@]}")"
for route in file null; do
  for rs in "${sizes[@]}"; do
    line="| $route | $rs |"
    for d in "${depths[@]}"; do
      if [ "$route" = file ]; then
        t=$(median_seconds --depth "$d" --request-size "$rs" "$src" "$dir/out.img")
      else
        t=$(median_seconds --depth "$d" --request-size "$rs" "$src" null:)
      fi
      line+=" $(mib_per_s "$t") |"
    done
    row "$line"
  done
done

fi

nbd_table=""
if [ "$sparse_only" = 0 ] && command -v nbdkit >/dev/null; then
  sock=$dir/nbdkit.sock
  rm -f "$sock"
  nbdkit --exit-with-parent -U "$sock" -f null size="$bytes" & nbdkit_pid=$!
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  nbd_table+="| route | request size | $(printf 'depth %s | ' "${depths[@]}")"$'\n'
  nbd_table+="|---|---|$(printf -- '--:|%.0s' "${depths[@]}")"$'\n'
  for rs in "${sizes[@]}"; do
    line="| nbd (unix, nbdkit null) | $rs |"
    for d in "${depths[@]}"; do
      if t=$(median_seconds --depth "$d" --request-size "$rs" "$src" "nbd+unix:///?socket=$sock" 2>/dev/null); then
        line+=" $(mib_per_s "$t") |"
      else
        line+=" n/a |"
      fi
    done
    nbd_table+="$line"$'\n'
  done
  echo "$nbd_table"
  kill "$nbdkit_pid" 2>/dev/null || true
  wait "$nbdkit_pid" 2>/dev/null || true
  nbdkit_pid=
fi

sparse_table="| --sparse | random data, to file MiB/s | half zeros (1 MiB runs), to file MiB/s | its copy allocated | 1 in 4 blocks of 4 KiB zero, to file MiB/s | its copy allocated |"$'\n'
sparse_table+="|---|--:|--:|--:|--:|--:|"$'\n'
for sp in 0 4k 64k 1M; do
  t1=$(median_seconds --sparse="$sp" "$src" "$dir/out.img")
  t2=$(median_seconds --sparse="$sp" "$zeroish" "$dir/out.img")
  alloc=$(du -B1M "$dir/out.img" | cut -f1)
  t3=$(median_seconds --sparse="$sp" "$scattered" "$dir/out.img")
  alloc3=$(du -B1M "$dir/out.img" | cut -f1)
  sparse_table+="| $sp | $(mib_per_s "$t1") | $(mib_per_s "$t2") | ${alloc} MiB | $(mib_per_s "$t3") | ${alloc3} MiB |"$'\n'
done
echo "$sparse_table"

name=sweep-defaults flags= title="Choosing the defaults: depth, request size, zero detection"
if [ "$sparse_only" = 1 ]; then
  name=sweep-sparse flags=" --sparse-only" title="Choosing the default zero-detection granularity (--sparse)"
fi
section=$(cat <<MD
<!-- $name:begin -->
## $title

- Command: \`tests/bench/sweep-defaults.sh --runs $runs --size $size${flags}\`
- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), Linux $(uname -r), $(df -T "$dir" | awk 'NR==2{print $2}') under $dir
- Figures: MiB/s of a $size image of random data (median of $runs runs, seconds from \`--stats\`, page cache warm); file -> file includes the final flush.

$table
${nbd_table:+NBD destination (nbdkit null over a Unix socket):

$nbd_table}
Zero detection granularity (default depth and request size):

$sparse_table
<!-- $name:end -->
MD
)
if [ -z "$doc" ]; then
  echo "not written into any doc (--quick or --no-docs; --output FILE writes it)"
  exit 0
fi
/usr/bin/python3 - "$doc" "$section" "$name" <<'PY'
import re, sys
path, section, name = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# Benchmarks\n"
pattern = re.compile(r"<!-- %s:begin -->.*?<!-- %s:end -->" % (name, name), re.S)
text = pattern.sub(lambda m: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
echo "wrote $doc"
