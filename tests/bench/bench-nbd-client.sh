#!/bin/bash
# bench-nbd-client.sh: Sluice's NBD client side by side with nbdcopy and
# `qemu-img convert -n -W -m 16`, in one run, on the same data and the same servers:
#
#   1. a random file -> nbdkit null, TCP loopback
#   2. the same, nbdkit --filter=delay wdelay=1ms
#   3. the same over TLS (nbdkit --tls=require, X.509)
#   4. a sparse file (5% data in scattered 1..8 MiB extents) -> nbdkit memory
#   5. NBD (nbdkit file) -> a local file, flushed by every tool
#
# plus Sluice on one event loop (--threads 1; by default each connection has its own,
# and the copy runs a lane on each: engine/copier.hpp) on rows 1..3, and Sluice's own arms on rows 1..3, as the field measured vhd-tool, each
# on one connection: stock (--depth 1 --no-nodelay), NODELAY only (--depth 1), pipelined only
# (--no-nodelay), both (the default depth and NODELAY). Row 3 also has Sluice on
# AES-256-GCM, the suite nbdcopy and qemu-img negotiate (Sluice's default is AES-128-GCM).
#
# Every tool runs RUNS times, interleaved (every tool once per run, the order rotating
# each run so that no tool always goes first) so drift hits all alike; the table shows
# the median wall time, MiB/s of the source's size, the ratio to nbdcopy, and client CPU
# seconds (user + sys from /usr/bin/time, all threads) per GiB. The source files are
# read once first, so every run starts from a warm page cache.
#
# Verified: rows 1-3 by exit status only (nbdkit null keeps nothing); row 4 into a fresh
# nbdkit memory export per run, compared with the source by `qemu-img compare` before
# the export goes; row 5's output file compared with the source by cmp. A run that
# fails or differs is reported, left out of the table, and makes the script exit 1.
#
#   tests/bench/bench-nbd-client.sh [--quick] [--runs N] [--update-docs] [--keep]
#
#   --quick        512 MiB / 8 GiB sparse instead of 4 GiB / 64 GiB, 1 run: checks the
#                  harness and finds gross problems; not for publishing
#   --runs N       runs per tool and row (default 5; 1 with --quick)
#   --update-docs  replace the bench-nbd-client section of docs/benchmarks.md (never
#                  otherwise, --quick or not)
#   --keep         keep the scratch directory (the images) for the next run
#
# Environment: SLUICE (default build/apps/sluice/sluice; a release or debugoptimized
# build), BENCH_DIR (default /var/tmp; needs the file sizes in free space).
# Not a test: it asserts nothing and takes a while (full: ~30 min on 2 vCPUs).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SLUICE=${SLUICE:-$root/build/apps/sluice/sluice}
export PATH=/usr/bin:/usr/sbin:$PATH
PYTHON=/usr/bin/python3

quick=false
runs=
update_docs=false
keep=false
command_line="tests/bench/bench-nbd-client.sh $*"
while (($#)); do
  case $1 in
    --quick) quick=true ;;
    --runs) runs=$2; shift ;;
    --update-docs) update_docs=true ;;
    --keep) keep=true ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if $quick; then
  size=512M sparse_size=8G runs=${runs:-1}
else
  size=4G sparse_size=64G runs=${runs:-5}
fi

for tool in nbdkit nbdcopy qemu-img openssl /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 1; }
done
[[ -x $SLUICE ]] || { echo "bench: no sluice at $SLUICE" >&2; exit 1; }

work=${BENCH_DIR:-/var/tmp}/sluice-bench-nbd
mkdir -p "$work"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  $keep || rm -rf -- "$work"
}
trap cleanup EXIT

bytes() {
  local n=${1%[KMG]}
  case $1 in *K) echo $((n << 10)) ;; *M) echo $((n << 20)) ;; *G) echo $((n << 30)) ;; *) echo "$1" ;; esac
}

# ---- data ----
src=$work/random-$size.img
if [[ ! -s $src || $(stat -c %s "$src") -ne $(bytes $size) ]]; then
  echo "bench: writing $size of random data" >&2
  head -c "$(bytes $size)" /dev/urandom >"$src"
fi
sparse=$work/sparse-$sparse_size.img
if [[ ! -s $sparse ]]; then
  echo "bench: writing a $sparse_size sparse image with 5% data" >&2
  "$PYTHON" - "$sparse" "$(bytes $sparse_size)" <<'PY'
import os, random, sys
path, size = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, size)
target, written = size // 20, 0
while written < target:
    length = rng.randint(1, 8) << 20
    offset = rng.randrange(0, size - length) & ~0xFFFF
    os.pwrite(fd, os.urandom(length), offset)
    written += length
os.close(fd)
PY
fi
pki=$work/pki
if [[ ! -s $pki/server-cert.pem ]]; then
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca-key.pem -out ca-cert.pem \
      -days 30 -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server-key.pem -out server.csr \
      -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem \
      -days 30 -extfile server.ext 2>/dev/null
    chmod 644 ./*.pem
  )
fi
# Warm caches for every tool alike: the random file, and the sparse file's data.
cat "$src" >/dev/null
"$PYTHON" - "$sparse" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, pos = os.fstat(fd).st_size, 0
while pos < size:
    try:
        start = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:
        break
    end = os.lseek(fd, start, os.SEEK_HOLE)
    while start < end:
        n = len(os.pread(fd, min(8 << 20, end - start), start))
        start += n
    pos = end
PY

# ---- servers ----
free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# start_nbdkit ARGS...: sets $port
start_nbdkit() {
  port=$(free_port)
  local pidfile=$work/nbdkit-$port.pid
  nbdkit -i 127.0.0.1 -p "$port" -P "$pidfile" "$@"
  for _ in $(seq 100); do [[ -s $pidfile ]] && break; sleep 0.05; done
  pids+=("$(cat "$pidfile")")
}
stop_servers() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  pids=()
  sleep 0.2
}

# ---- measuring ----
results=$work/results.txt
: >"$results"
failed=()
# failure ROW TOOL WHY: a run that failed or whose copy differs; the script exits 1.
failure() {
  echo "bench: FAILED: $2 on row $1: $3" >&2
  failed+=("$1: $2: $3")
}
# measure ROW TOOL SIZE_BYTES CMD...: one timed run, appended to $results; returns 1
# (after recording the failure) when CMD fails.
measure() {
  local row=$1 tool=$2 size_bytes=$3
  shift 3
  local t=$work/time.txt
  if ! /usr/bin/time -f '%e %U %S' -o "$t" "$@" >/dev/null 2>"$work/stderr.txt"; then
    failure "$row" "$tool" "exit status; $(tail -3 "$work/stderr.txt" | tr '\n' ' ')"
    return 1
  fi
  echo "$row|$tool|$size_bytes|$(cat "$t")" >>"$results"
}
# unmeasure ROW TOOL: the last run did not verify: out of the table.
unmeasure() { sed -i '$d' "$results"; }

tls_uri() { echo "nbds://localhost:$1/?tls-certificates=$pki"; }

# run_row ROW-FUNCTION TOOL...: every tool once per run, RUNS runs, the order rotating
# each run (as in bench-copy.sh), so that no tool always goes first or last.
run_row() {
  local fn=$1 i j
  shift
  local tools=("$@")
  for ((i = 0; i < runs; i++)); do
    for ((j = 0; j < ${#tools[@]}; j++)); do
      "$fn" "${tools[(i + j) % ${#tools[@]}]}"
    done
  done
}

# On one connection each, as the field's writer had (the defaults row above uses two
# where the server allows multi-conn).
declare -A arm_flags=(["stock"]="--connections 1 --depth 1 --no-nodelay" ["NODELAY only"]="--connections 1 --depth 1"
  ["pipelined only"]="--connections 1 --no-nodelay" ["both"]="--connections 1")
sluice_arms=("sluice stock" "sluice NODELAY only" "sluice pipelined only" "sluice both")

row1() { # row1 TOOL: file -> nbdkit null at $uri, row $label
  local n
  n=$(bytes $size)
  # shellcheck disable=SC2086 # an arm's flags are words
  case $1 in
    sluice) measure "$label" "$1" "$n" "$SLUICE" copy "$src" "$uri" ;;
    nbdcopy) measure "$label" "$1" "$n" nbdcopy "$src" "$uri" ;;
    qemu-img) measure "$label" "$1" "$n" qemu-img convert -n -W -m 16 -f raw -O raw "$src" "$uri" ;;
    # Each connection has a loop of its own by default; this is one loop for both.
    "sluice --threads 1") measure "$label" "$1" "$n" "$SLUICE" copy --threads 1 "$src" "$uri" ;;
    "sluice "*) measure "$label" "$1" "$n" "$SLUICE" copy ${arm_flags[${1#sluice }]} "$src" "$uri" ;;
  esac || true
}

row_tls() { # row_tls TOOL: the same over TLS to the port $tls_port
  local n uri
  n=$(bytes $size)
  uri=$(tls_uri "$tls_port")
  # shellcheck disable=SC2086 # an arm's flags are words
  case $1 in
    sluice) measure "$label" "$1" "$n" "$SLUICE" copy "$src" "$uri" ;;
    nbdcopy) measure "$label" "$1" "$n" nbdcopy "$src" "$uri" ;;
    qemu-img)
      measure "$label" "$1" "$n" qemu-img convert -n -W -m 16 \
        --object "tls-creds-x509,id=tls0,endpoint=client,dir=$pki" -f raw "$src" \
        --target-image-opts "driver=nbd,host=localhost,port=$tls_port,tls-creds=tls0"
      ;;
    # Each connection has a loop of its own by default; this is one loop for both.
    "sluice --threads 1") measure "$label" "$1" "$n" "$SLUICE" copy --threads 1 "$src" "$uri" ;;
    # Sluice offers AES-128-GCM first and nbdkit takes it; nbdcopy and qemu-img (GnuTLS)
    # offer AES-256-GCM first. This line is Sluice on the peers' cipher.
    "sluice AES-256") measure "$label" "$1" "$n" "$SLUICE" copy --tls-ciphersuites TLS_AES_256_GCM_SHA384 "$src" "$uri" ;;
    "sluice "*) measure "$label" "$1" "$n" "$SLUICE" copy ${arm_flags[${1#sluice }]} "$src" "$uri" ;;
  esac || true
}

row_sparse() { # row_sparse TOOL: the sparse file into a fresh nbdkit memory export
  local n uri
  n=$(stat -c %s "$sparse")
  # A fresh export each run: one left written by the previous tool would make a copy
  # that wrote nothing look right.
  start_nbdkit memory "$sparse_size"
  uri=nbd://127.0.0.1:$port/
  case $1 in
    sluice) measure "$label" "$1" "$n" "$SLUICE" copy "$sparse" "$uri" ;;
    nbdcopy) measure "$label" "$1" "$n" nbdcopy "$sparse" "$uri" ;;
    qemu-img) measure "$label" "$1" "$n" qemu-img convert -n -W -m 16 -f raw -O raw "$sparse" "$uri" ;;
  esac && if ! timeout 600 qemu-img compare -q -f raw -F raw "$sparse" "$uri" 2>"$work/compare.txt"; then
    unmeasure
    failure "$label" "$1" "the export differs from the source (qemu-img compare: $(tr '\n' ' ' <"$work/compare.txt"))"
  fi
  stop_servers
}

row_to_file() { # row_to_file TOOL: NBD at $uri -> $work/out.img, compared with the source
  local out=$work/out.img n
  n=$(bytes $size)
  rm -f "$out"
  case $1 in
    sluice) measure "$label" "$1" "$n" "$SLUICE" copy "$uri" "$out" ;;
    nbdcopy) measure "$label" "$1" "$n" nbdcopy --flush "$uri" "$out" ;;
    qemu-img) measure "$label" "$1" "$n" qemu-img convert -W -m 16 -t writeback -f raw "$uri" -O raw "$out" ;;
  esac && if ! cmp -s "$src" "$out"; then
    unmeasure
    failure "$label" "$1" "the output file differs from the source (cmp)"
  fi
  rm -f "$out"
}

r1="1. file -> nbdkit null (TCP)"
r2="2. file -> nbdkit null, delay wdelay=1ms"
r3="3. file -> nbdkit null, TLS"
r4="4. sparse $sparse_size (5% data) -> nbdkit memory"
r5="5. nbdkit file -> file (flushed)"
null_tools=(sluice nbdcopy qemu-img "sluice --threads 1" "${sluice_arms[@]}")

echo "bench: row 1" >&2
start_nbdkit null "$size"
label=$r1 uri=nbd://127.0.0.1:$port/
run_row row1 "${null_tools[@]}"
stop_servers

echo "bench: row 2" >&2
start_nbdkit --filter=delay null "$size" wdelay=1ms
label=$r2 uri=nbd://127.0.0.1:$port/
run_row row1 "${null_tools[@]}"
stop_servers

echo "bench: row 3" >&2
start_nbdkit --tls=require --tls-certificates="$pki" null "$size"
label=$r3 tls_port=$port
run_row row_tls sluice nbdcopy qemu-img "sluice --threads 1" "sluice AES-256" "${sluice_arms[@]}"
stop_servers

echo "bench: row 4" >&2
# One untimed copy into a throwaway export first. A VM's memory may be backed by the
# host only when the guest first touches it: the first process to fill 3.3 GiB of fresh
# memory paid for that (nbdkit memory took 12.2 s on 12-06 for what took 4.0 s in the
# next round), and which tool ran first would have decided the row.
start_nbdkit memory "$sparse_size"
nbdcopy "$sparse" "nbd://127.0.0.1:$port/" || { echo "bench: the warm-up copy into nbdkit memory failed" >&2; exit 1; }
stop_servers
label=$r4
run_row row_sparse sluice nbdcopy qemu-img

echo "bench: row 5" >&2
start_nbdkit file file="$src"
label=$r5 uri=nbd://127.0.0.1:$port/
run_row row_to_file sluice nbdcopy qemu-img
stop_servers

# ---- report ----
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) vCPUs, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, Linux $(uname -r)"
versions="$("$SLUICE" --version), $(nbdcopy --version | head -1), $(qemu-img --version | head -1 | cut -d' ' -f1-3), nbdkit $(nbdkit --version | cut -d' ' -f2)"
report=$work/report.md
"$PYTHON" - "$results" "$runs" "$command_line" "$machine" "$versions" "$(date -u +%Y-%m-%d)" "$quick" >"$report" <<'PY'
import statistics, sys
from collections import OrderedDict
path, runs, command, machine, versions, day, quick = sys.argv[1:8]
rows = OrderedDict()
for line in open(path):
    row, tool, size, wall, user, system = line.strip().split("|")[0:3] + line.strip().split("|")[3].split()
    rows.setdefault(row, OrderedDict()).setdefault(tool, []).append((int(size), float(wall), float(user) + float(system)))
print(f"Measured {day} with `{command}` ({runs} run(s) per tool and row, interleaved; median shown).")
print(f"Machine: {machine}. Tools: {versions}.")
if quick == "true":
    print("**Quick mode: small sizes and few runs, on a machine shared with other work. Indicative only.**")
print()
print("Verified: rows 1-3 by exit status (nbdkit null keeps nothing); row 4 by `qemu-img compare` of a fresh "
      "export per run with the source; row 5 by cmp of the output with the source.")
print()
print("| row | tool | median s | MiB/s | vs nbdcopy | CPU s/GiB | runs |")
print("|---|---|---:|---:|---:|---:|---:|")
for row, tools in rows.items():
    base = statistics.median(w for _, w, _ in tools.get("nbdcopy", [(1, float("nan"), 0)]))
    for tool, samples in tools.items():
        size = samples[0][0]
        wall = statistics.median(w for _, w, _ in samples)
        cpu = statistics.median(c for _, _, c in samples) / (size / 2**30)
        rate = size / 2**20 / wall if wall > 0 else float("inf")
        ratio = base / wall if wall > 0 else float("inf")
        print(f"| {row} | {tool} | {wall:.2f} | {rate:.0f} | {ratio:.2f}x | {cpu:.2f} | {len(samples)} |")
PY
if ((${#failed[@]})); then
  {
    echo
    echo "**${#failed[@]} run(s) failed or did not verify** (left out of the table above):"
    echo
    printf -- '- %s\n' "${failed[@]}"
  } >>"$report"
fi
cat "$report"

if $update_docs; then
  docs=$root/docs/benchmarks.md
  [[ -f $docs ]] || printf '# Benchmarks\n' >"$docs"
  "$PYTHON" - "$docs" "$report" <<'PY'
import sys
docs, report = sys.argv[1], open(sys.argv[2]).read().rstrip() + "\n"
begin, end = "<!-- bench-nbd-client:begin -->", "<!-- bench-nbd-client:end -->"
text = open(docs).read()
block = begin + "\n" + report + end
if begin in text and end in text:
    text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
else:
    text = text.rstrip() + "\n\n## NBD client (tests/bench/bench-nbd-client.sh)\n\n" + block + "\n"
open(docs, "w").write(text)
PY
  echo "bench: updated $docs" >&2
fi
if ((${#failed[@]})); then
  echo "bench: ${#failed[@]} run(s) failed or did not verify" >&2
  exit 1
fi
