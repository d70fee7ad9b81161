#!/bin/bash
# bench-copy: sluice copy against cp, qemu-img convert and nbdcopy on local images,
# side by side in one run (issue 2's benchmark). Not a test: nothing here is timed
# against a limit by meson.
#
#   tests/bench/bench-copy.sh [--quick] [--cold] [--scattered] [--runs N] [--dir DIR] [--output FILE] [--no-docs]
#
# Images: (a) random data, 4 GiB; (b) a 64 GiB sparse file, 5% data in scattered
# 1..8 MiB extents; with --scattered instead, (c) 2 GiB with a quarter of its 4 KiB
# blocks zero at random, as a filesystem image's free blocks (fully allocated: only
# zero detection finds them). Each is copied file -> file and file -> null by every tool, N
# runs (default 5) interleaved across the tools, on a warm page cache. Every file copy
# is compared with cmp on the first run (all runs with --verify-all); a run that fails
# or differs stops the benchmark, so no unverified number is reported.
#
# Prints a section for between <!-- bench-copy:begin --> and <!-- bench-copy:end -->,
# and writes it into docs/benchmarks.md (or --output), except with --quick or --no-docs.
#
#   --quick        smoke test: 256M random, 4G sparse, 2 runs; leaves docs/ alone
#                  unless --output is given
#   --cold         read the source from the disk: before every run its pages are
#                  dropped from the page cache (posix_fadvise DONTNEED: no root needed,
#                  the rest of the cache is left alone); its own section in the doc
#   --scattered    only image (c); its own section in the doc
#   --runs N       runs per tool and route
#   --dir DIR      where the images and copies live (default /var/tmp/sluice-bench);
#                  kept between invocations so the images are made only once
#   --output FILE  the markdown file to update (default docs/benchmarks.md)
#   --no-docs      only print the section
#   --sluice PATH  the binary (default build/apps/sluice/sluice)
#   --verify-all   cmp every run, not only the first
set -euo pipefail

trap 'echo "bench-copy: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

source_root=$(cd "$(dirname "$0")/../.." && pwd)
command_line="tests/bench/bench-copy.sh${*:+ $*}"
PYTHON=/usr/bin/python3

quick=false
runs=
dir=/var/tmp/sluice-bench
output=
no_docs=false
sluice=$source_root/build/apps/sluice/sluice
verify_all=false
cold=false
scattered=false

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() {
  echo "bench-copy: $*" >&2
  exit 1
}

while (($#)); do
  case $1 in
    --quick) quick=true ;;
    --runs) runs=${2:?--runs needs N}; shift ;;
    --runs=*) runs=${1#*=} ;;
    --dir) dir=${2:?--dir needs DIR}; shift ;;
    --dir=*) dir=${1#*=} ;;
    --output) output=${2:?--output needs FILE}; shift ;;
    --output=*) output=${1#*=} ;;
    --sluice) sluice=${2:?--sluice needs PATH}; shift ;;
    --sluice=*) sluice=${1#*=} ;;
    --verify-all) verify_all=true ;;
    --no-docs) no_docs=true ;;
    --cold) cold=true ;;
    --scattered) scattered=true ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

if $quick; then
  random_size=$((256 << 20))
  sparse_size=$((4 << 30))
  scattered_size=$((256 << 20))
  runs=${runs:-2}
else
  random_size=$((4 << 30))
  sparse_size=$((64 << 30))
  scattered_size=$((2 << 30))
  runs=${runs:-5}
fi
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"
# A quick run is a smoke test: its numbers go into a doc only when one is named.
if $no_docs; then
  output=
elif [[ -z $output ]] && ! $quick; then
  output=$source_root/docs/benchmarks.md
fi
sparse_percent=5

[[ -x $sluice ]] || die "no sluice binary at $sluice (build first: tests/setup-debian.sh)"
for tool in cp qemu-img nbdcopy cmp /usr/bin/time "$PYTHON"; do
  command -v "$tool" >/dev/null || die "'$tool' is missing (tests/setup-debian.sh installs it)"
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work=$(mktemp -d "$dir/run.XXXXXX")
trap 'rm -rf "$work"' EXIT

log() { printf '[bench-copy %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
human() { numfmt --to=iec-i --suffix=B "$1"; }

# Room for the images, one copy of each, and slack.
sparse_data_estimate=$((sparse_size * sparse_percent / 100))
needed=$(((random_size + sparse_data_estimate) * 2 + (1 << 30)))
$scattered && needed=$((scattered_size * 2 + (1 << 30)))
available=$(($(df --output=avail -B1 "$dir" | tail -n1)))
((available >= needed)) || die "$dir has $(human "$available") free; this run needs about $(human "$needed")"

# --- images ----------------------------------------------------------------------

random_img=$dir/random-$(human "$random_size").img
sparse_img=$dir/sparse-$(human "$sparse_size")-${sparse_percent}pct.img
scattered_img=$dir/scattered-$(human "$scattered_size")-25pct-zero-blocks.img

if $scattered; then
  if [[ ! -f $scattered_img || $(stat -c %s "$scattered_img") -ne $scattered_size ]]; then
    log "making $scattered_img"
    "$PYTHON" - "$scattered_img.tmp" "$scattered_size" <<'EOF'
# Every 4 KiB block is zero with probability 1/4, else random; written in full, so
# the file has no holes. Fixed seed: the same layout every time.
import os, random, sys
path, size = sys.argv[1], int(sys.argv[2])
rng = random.Random(3)
block, chunk = 4096, 64 << 20
with open(path, "wb") as f:
    for start in range(0, size, chunk):
        data = bytearray(os.urandom(min(chunk, size - start)))
        for at in range(0, len(data), block):
            if rng.random() < 0.25:
                data[at:at + block] = bytes(block)
        f.write(data)
    os.fsync(f.fileno())
EOF
    mv "$scattered_img.tmp" "$scattered_img"
  fi
elif [[ ! -f $random_img || $(stat -c %s "$random_img") -ne $random_size ]]; then
  log "making $random_img"
  head -c "$random_size" /dev/urandom >"$random_img.tmp"
  mv "$random_img.tmp" "$random_img"
fi

if ! $scattered && [[ ! -f $sparse_img || ! -f $sparse_img.layout || $(stat -c %s "$sparse_img") -ne $sparse_size ]]; then
  log "making $sparse_img"
  "$PYTHON" - "$sparse_img.tmp" "$sparse_size" "$sparse_percent" <<'EOF'
# Scattered extents of 1..8 MiB (64 KiB steps) at random 4 KiB-aligned offsets, never
# touching each other, until the data reaches the wanted share of the size. Fixed seed:
# the same layout every time; the content is random.
import bisect, os, random, sys
path, size, percent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(20240601)
want = size * percent // 100
starts, extents, total = [], [], 0
while total < want:
    length = rng.randrange(16, 129) * 65536
    offset = rng.randrange(0, (size - length) // 4096) * 4096
    i = bisect.bisect_left(starts, offset)
    if i > 0 and extents[i - 1][0] + extents[i - 1][1] + 4096 > offset:
        continue
    if i < len(starts) and offset + length + 4096 > starts[i]:
        continue
    starts.insert(i, offset)
    extents.insert(i, (offset, length))
    total += length
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, size)
for offset, length in extents:
    done = 0
    while done < length:
        chunk = os.urandom(min(8 << 20, length - done))
        os.pwrite(fd, chunk, offset + done)
        done += len(chunk)
os.fsync(fd)
os.close(fd)
with open(path + ".layout", "w") as f:
    f.write(f"{len(extents)} {total}\n")
EOF
  mv "$sparse_img.tmp.layout" "$sparse_img.layout"
  mv "$sparse_img.tmp" "$sparse_img"
fi
$scattered || read -r sparse_extents sparse_data <"$sparse_img.layout"

# --- the tools ---------------------------------------------------------------------

tools=(sluice cp qemu-img nbdcopy)

# command_for TOOL ROUTE SOURCE SIZE DESTINATION: the command line, into $cmd.
# Every file -> file command leaves the data on stable storage (sluice flushes by
# default; cp is followed by sync --data; qemu-img gets -t writeback, nbdcopy
# --flush), and writes a new file (the previous copy is deleted, untimed), so each
# tool may treat it as zero.
command_for() {
  local tool=$1 route=$2 src=$3 size=$4 dst=$5
  # shellcheck disable=SC2016 # cp/file's "$1" "$2" are expanded by that sh
  case $tool/$route in
    sluice/file) cmd=("$sluice" copy "$src" "$dst") ;;
    sluice/null) cmd=("$sluice" copy "$src" null:) ;;
    cp/file) cmd=(sh -c 'cp --sparse=always "$1" "$2" && sync --data "$2"' cp "$src" "$dst") ;;
    # cp has no null sink. /dev/null is the nearest: cp still finds the data with
    # SEEK_DATA and reads only that; the holes become write()s of zeros to /dev/null,
    # which cost a system call per 128 KiB and no I/O.
    cp/null) cmd=(cp --sparse=always "$src" /dev/null) ;;
    # convert's default cache mode for the target is "unsafe": it never flushes.
    # -t writeback makes it fdatasync at the end like the others.
    qemu-img/file) cmd=(qemu-img convert -W -m 16 -t writeback -f raw -O raw "$src" "$dst") ;;
    # qemu-img's null sink is the null-co block driver; a target given by options must
    # already exist, hence -n.
    qemu-img/null) cmd=(qemu-img convert -n -W -m 16 -f raw "$src" --target-image-opts "driver=null-co,size=$size") ;;
    nbdcopy/file) cmd=(nbdcopy --flush "$src" "$dst") ;;
    nbdcopy/null) cmd=(nbdcopy "$src" null:) ;;
    *) die "no command for $tool/$route" ;;
  esac
}

results=$work/results.tsv
: >"$results"

# drop_cached FILE: FILE's clean pages leave the page cache, so the next read of it
# comes from the disk.
drop_cached() {
  "$PYTHON" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}

# bench IMAGE-NAME SOURCE SIZE DATA-BYTES
bench() {
  local name=$1 src=$2 size=$3 data=$4 route run i tool start end micros seconds rss verified
  if ! $cold; then
    log "warming the page cache with $src"
    cp --sparse=always "$src" /dev/null # reads the data extents, skips the holes
  fi
  for route in file null; do
    for ((run = 1; run <= runs; run++)); do
      # Rotate the order every run: no tool always goes first (or last).
      for ((i = 0; i < ${#tools[@]}; i++)); do
        tool=${tools[(i + run - 1) % ${#tools[@]}]}
        local dst=$work/copy.img
        rm -f "$dst"
        sync -f "$work"
        command_for "$tool" "$route" "$src" "$size" "$dst"
        $cold && drop_cached "$src"
        start=$EPOCHREALTIME
        if ! /usr/bin/time -f %M -o "$work/rss" "${cmd[@]}" >"$work/out" 2>&1; then
          cat "$work/out" >&2
          die "$tool failed on $name -> $route (run $run): ${cmd[*]}"
        fi
        end=$EPOCHREALTIME
        micros=$((10#${end/./} - 10#${start/./}))
        seconds=$(printf '%d.%06d' $((micros / 1000000)) $((micros % 1000000)))
        rss=$(tail -n1 "$work/rss")
        verified=exit-status
        if [[ $route == file ]] && { ((run == 1)) || $verify_all; }; then
          cmp "$src" "$dst" >/dev/null 2>&1 || die "$tool's copy of $name differs from the source (run $run): ${cmd[*]}"
          verified="cmp"
        fi
        log "$name -> $route  run $run  $tool  ${seconds}s  ${rss} KiB  ($verified)"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
          "$name" "$route" "$tool" "$run" "$seconds" "$rss" "$verified" "$size" "$data" >>"$results"
        rm -f "$dst"
      done
    done
  done
}

if $scattered; then
  # Data bytes: what zero detection leaves, a quarter of the blocks fewer.
  bench "(c) scattered $(human "$scattered_size"), 1 in 4 blocks zero" "$scattered_img" "$scattered_size" \
    $((scattered_size * 3 / 4))
else
  bench "(a) random $(human "$random_size")" "$random_img" "$random_size" "$random_size"
  bench "(b) sparse $(human "$sparse_size"), ${sparse_percent}% data" "$sparse_img" "$sparse_size" "$sparse_data"
fi

# --- the report --------------------------------------------------------------------

# Sluice's buffer memory is depth x request size with its defaults, read from --help.
help=$("$sluice" copy --help)
# Only what follows "(default " up to the end of the value: the rest of the text may change.
depth=$(sed -n 's/.*--depth N .*(default \([0-9][0-9]*\).*/\1/p' <<<"$help")
request=$(sed -n 's/.*--request-size SIZE .*(default \([0-9][0-9]*[kKmM]\).*/\1/p' <<<"$help")
[[ -n $depth && -n $request ]] || die "cannot read sluice's default depth and request size from its --help"
request_bytes=$(numfmt --from=iec "${request^^}")
rss_limit_kib=$(((depth * request_bytes + (32 << 20)) / 1024))

# No "| head" under pipefail: an early exit would kill the writer with SIGPIPE.
cpu=$(sed -n '/^model name/{s/^model name[[:space:]]*: //;p;q}' /proc/cpuinfo)
memory=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
filesystem=$(findmnt -n -T "$dir" -o FSTYPE,SOURCE,OPTIONS | awk '{ print $1 " on " $2 " (" $3 ")" }')
versions="$("$sluice" --version); $(cp --version | sed -n 1p); $(qemu-img --version | sed -n 1p); $(nbdcopy --version | sed -n 1p)"

section=$("$PYTHON" - "$results" <<EOF
import collections, statistics, sys
rows = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    name, route, tool, run, seconds, rss, verified, size, data = line.rstrip("\n").split("\t")
    key = (name, route)
    if key not in order:
        order.append(key)
    rows[key].append((tool, float(seconds), int(rss), verified, int(size), int(data)))

MiB = 1 << 20
tools = ["sluice", "cp", "qemu-img", "nbdcopy"]
print("| Image | To | Tool | Median s | Min-max s | MiB/s (virtual) | MiB/s (data) "
      "| Speed vs fastest peer | Peak RSS MiB | RSS <= ${depth}x${request}+32M |")
print("|---|---|---|--:|--:|--:|--:|--:|--:|:-:|")
targets = []
medians = {}
for key in order:
    name, route = key
    by_tool = collections.defaultdict(list)
    for tool, seconds, rss, verified, size, data in rows[key]:
        by_tool[tool].append((seconds, rss, verified, size, data))
    median = {t: statistics.median(s for s, *_ in v) for t, v in by_tool.items()}
    medians[key] = median
    fastest_peer = min(m for t, m in median.items() if t != "sluice")
    for tool in tools:
        if tool not in by_tool:
            continue
        runs = by_tool[tool]
        secs = [s for s, *_ in runs]
        peak = max(r for _, r, *_ in runs)
        size, data = runs[0][3], runs[0][4]
        m = median[tool]
        speed = fastest_peer / m if m > 0 else float("inf")
        rss_check = ""
        if tool == "sluice":
            ok = peak <= $rss_limit_kib
            rss_check = "PASS" if ok else "FAIL"
            targets.append((f"{name} -> {route}: peak RSS {peak / 1024:.1f} MiB <= "
                            f"{$rss_limit_kib / 1024:.0f} MiB", ok))
            targets.append((f"{name} -> {route}: at least as fast as the fastest peer "
                            f"({speed:.2f}x)", m <= fastest_peer))
        print(f"| {name} | {route} | {'**sluice**' if tool == 'sluice' else tool} | {m:.3f} "
              f"| {min(secs):.3f}-{max(secs):.3f} | {size / MiB / m:,.0f} | {data / MiB / m:,.0f} "
              f"| {speed:.2f}x | {peak / 1024:.1f} | {rss_check} |")

# (b) in time proportional to its data: Sluice's seconds per data byte on the sparse
# image within twice those on the random image, same route.
for route in ("file", "null"):
    dense = [k for k in order if k[1] == route and k[0].startswith("(a)")]
    sparse = [k for k in order if k[1] == route and k[0].startswith("(b)")]
    if dense and sparse:
        d = rows[dense[0]][0][5] ; s = rows[sparse[0]][0][5]
        per_byte_dense = medians[dense[0]]["sluice"] / d
        per_byte_sparse = medians[sparse[0]]["sluice"] / s
        ratio = per_byte_sparse / per_byte_dense
        targets.append((f"(b) -> {route}: time proportional to the data, not the virtual size "
                        f"(time per data byte {ratio:.2f}x that of (a); limit 2x)", ratio <= 2.0))
print()
print("Targets (Sluice):")
print()
for text, ok in targets:
    print(f"- {'PASS' if ok else 'FAIL'}: {text}")
EOF
)

verified_note="every file copy compared with cmp on the first run"
images="(a) $(human "$random_size") of random data; (b) $(human "$sparse_size") sparse"
if $scattered; then
  images="(c) $(human "$scattered_size"), every 4 KiB block zero with probability 1/4 (seed 3), else random; no holes (MiB/s of the data counts the non-zero blocks)"
else
  data_percent=$("$PYTHON" -c "print(f'{100 * $sparse_data / $sparse_size:.1f}')")
  images="$images, $(human "$sparse_data") of data ($data_percent%) in $sparse_extents extents of 1..8 MiB at random offsets"
fi
$verify_all && verified_note="every file copy compared with cmp on every run"
mode="full"
$quick && mode="**quick smoke test** (small images, $runs runs) - these are not the issue's benchmark figures"

marker=bench-copy
heading="Local copies: sluice vs cp, qemu-img, nbdcopy"
cache_note="warm; each source is read once before its runs (caches cannot be dropped on this shared machine)"
if $cold; then
  marker=bench-copy-cold
  heading="$heading, cold source"
  cache_note="cold source: before every run the source's pages are dropped from the page cache (posix_fadvise DONTNEED); the rest of the cache is left alone"
fi
if $scattered; then
  marker=$marker-scattered
  heading="$heading, an image with scattered zero blocks"
fi

report=$(cat <<EOF
<!-- $marker:begin -->
## $heading

- Command: \`$command_line\`
- Date: $(date -u '+%Y-%m-%d %H:%M UTC')
- Mode: $mode
- Machine: $(nproc) CPUs ($cpu), $memory RAM, Linux $(uname -r); images on $filesystem
- Versions: $versions
- Images: $images
- Method: $runs runs per tool and route, interleaved (the tool order rotates every run); median wall time, min-max, MiB/s of the virtual size and of the data; peak RSS from \`/usr/bin/time -f %M\`
- Page cache: $cache_note
- Verified: $verified_note; every run's exit status checked (null runs leave nothing to compare)
- Speed vs fastest peer: the fastest median of cp, qemu-img and nbdcopy divided by the tool's (above 1.00x: faster than every peer)

$section

What each tool ran (SRC, DST; DST is deleted, untimed, before every run):

| Tool | file -> file | file -> null |
|---|---|---|
| sluice | \`sluice copy SRC DST\` (flushes) | \`sluice copy SRC null:\` |
| cp | \`cp --sparse=always SRC DST && sync --data DST\` | \`cp --sparse=always SRC /dev/null\` (no null sink: reads only the data extents, holes become free writes to /dev/null) |
| qemu-img | \`qemu-img convert -W -m 16 -t writeback -f raw -O raw SRC DST\` (creates DST; -t writeback because the default cache mode of convert never flushes) | \`qemu-img convert -n -W -m 16 -f raw SRC --target-image-opts driver=null-co,size=N\` |
| nbdcopy | \`nbdcopy --flush SRC DST\` | \`nbdcopy SRC null:\` |

All tools use their default zero detection and request sizes; Sluice's defaults are
depth $depth x $request requests, hence the RSS target of $((rss_limit_kib / 1024)) MiB.
Sluice reads a file into \`null:\` in lanes by default (one per CPU, up to 4, sharing
the depth; \`--stats\` says how many); every other route here runs in one.
<!-- $marker:end -->
EOF
)

printf '%s\n' "$report"
if [[ -z $output ]]; then
  log "not written into any doc (--quick or --no-docs; --output FILE writes it)"
  exit 0
fi
mkdir -p "$(dirname "$output")"
if [[ ! -f $output ]]; then
  cat >"$output" <<'EOF'
# Benchmarks

Measured results, each with the command that produced it, the date and the machine.
Sections between `<!-- name:begin -->` and `<!-- name:end -->` markers are rewritten by
the script that made them; rerun it to update them.
EOF
fi
"$PYTHON" - "$output" "$report" "$marker" <<'EOF'
import sys
path, section, marker = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
if begin in text and end in text:
    text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
EOF
log "written to $output"
