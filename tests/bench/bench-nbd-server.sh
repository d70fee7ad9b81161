#!/bin/bash
# Side by side: nbdcopy from a random file on tmpfs into (a) sluice serve --protocol
# nbd (its default threads, and --threads 1), (b) nbdkit file and (c) qemu-nbd, each
# exporting a file on tmpfs, then nbdcopy from each server to null:; in plaintext and
# over TLS (PSK, TLS 1.3). Reports MiB/s and the SERVER's CPU seconds per GiB (from
# /proc/PID/stat, utime + stime of all its threads) and writes the table into
# docs/benchmarks.md between the bench-nbd-server markers (--output FILE: there
# instead; --no-docs: nowhere, only printed).
#
#   tests/bench/bench-nbd-server.sh [--quick] [--runs N] [--size BYTES] [--sluice PATH]
#                                   [--output FILE] [--no-docs]
#
# Not a test: it takes minutes at full size (4 GiB, 3 runs) and wants a quiet machine.
# --quick (1 GiB, 1 run) only checks that everything works and gives rough numbers; it
# leaves docs/ alone unless --output is given.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SLUICE=${SLUICE:-$ROOT/build/apps/sluice/sluice}
SIZE=$((4 << 30))
RUNS=3
QUICK=0
DOC=
NO_DOCS=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1; SIZE=$((1 << 30)); RUNS=1 ;;
    --runs) RUNS=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --sluice) SLUICE=$2; shift ;;
    --output) DOC=$2; shift ;;
    --no-docs) NO_DOCS=1 ;;
    *) echo "usage: $0 [--quick] [--runs N] [--size BYTES] [--sluice PATH] [--output FILE] [--no-docs]" >&2; exit 2 ;;
  esac
  shift
done
# A quick run is a smoke test: its numbers go into a doc only when one is named.
if [ $NO_DOCS = 1 ]; then
  DOC=
elif [ -z "$DOC" ] && [ $QUICK = 0 ]; then
  DOC=$ROOT/docs/benchmarks.md
fi
for tool in nbdcopy nbdkit qemu-nbd openssl; do
  command -v "$tool" >/dev/null || { echo "bench-nbd-server: $tool is not installed" >&2; exit 1; }
done
[ -x "$SLUICE" ] || { echo "bench-nbd-server: no sluice binary at $SLUICE (build first)" >&2; exit 1; }

DIR=$(mktemp -d /dev/shm/sluice-bench.XXXXXX)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
TICKS=$(getconf CLK_TCK)
GIB=$(python3 -c "print($SIZE / (1 << 30))")

echo "creating a $SIZE-byte random source on tmpfs..." >&2
head -c "$SIZE" /dev/urandom >"$DIR/src.img"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# TLS by pre-shared key, in the file format all three servers read.
mkdir -p "$DIR/psk"
echo "bench:$(openssl rand -hex 32)" >"$DIR/psk/keys.psk"

# start NAME MODE: starts the server exporting $DIR/dst.img on $DIR/NAME.sock, plain or
# with TLS required (MODE tls); sets SERVER_PID and URI.
start() {
  local name=$1 mode=$2 sock="$DIR/$1.sock" export=
  local psk="$DIR/psk/keys.psk"
  local sluice_tls=() nbdkit_tls=() qemu_tls=()
  if [ "$mode" = tls ]; then
    sluice_tls=(--tls-psk-file "$psk")
    nbdkit_tls=(--tls=require "--tls-psk=$psk")
    qemu_tls=(--object "tls-creds-psk,id=tls0,endpoint=server,dir=$DIR/psk" --tls-creds tls0)
  fi
  rm -f "$DIR/dst.img" "$sock"
  truncate -s "$SIZE" "$DIR/dst.img"
  case $name in
    sluice|sluice-1-thread)
      local threads=()
      [ "$name" = sluice-1-thread ] && threads=(--threads 1)
      "$SLUICE" serve --protocol nbd --listen "unix://$sock" --export "bench=$DIR/dst.img" \
        "${threads[@]}" "${sluice_tls[@]}" &
      SERVER_PID=$!
      export=bench ;;
    nbdkit)
      nbdkit --foreground --unix "$sock" "${nbdkit_tls[@]}" file "$DIR/dst.img" &
      SERVER_PID=$! ;;
    qemu-nbd)
      # --shared lets nbdcopy use multi-conn like with the others (qemu-nbd then
      # advertises CAN_MULTI_CONN); the cache and aio modes are qemu-nbd's defaults.
      qemu-nbd --format=raw --socket="$sock" --shared=8 --persistent "${qemu_tls[@]}" "$DIR/dst.img" &
      SERVER_PID=$! ;;
  esac
  if [ "$mode" = tls ]; then
    URI="nbds+unix://bench@/$export?socket=$sock&tls-psk-file=$psk"
  else
    URI="nbd+unix:///$export?socket=$sock"
  fi
  local i
  for i in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.05; done
  echo "bench-nbd-server: $name did not start" >&2
  exit 1
}

stop() {
  kill "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

# measure CMD...: runs CMD; prints "seconds cpu_seconds" (wall clock, server CPU).
measure() {
  local c0 c1 t0 t1
  c0=$(cpu_ticks "$SERVER_PID")
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$SERVER_PID")
  python3 -c "print($t1 - $t0, ($c1 - $c0) / $TICKS)"
}

# Median of the runs' wall clocks, with the CPU of that same run.
median() { sort -n | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }

SERVERS=(sluice sluice-1-thread nbdkit qemu-nbd)
MODES=(plain tls)
declare -A WRITE READ
# The first copy after the source was made ran at half speed and twice the CPU,
# whichever server took it (the kernel settling its memory after the 4 GiB of new
# tmpfs pages, presumably): one untimed copy first, so no server pays for it.
start nbdkit plain
nbdcopy "$DIR/src.img" "$URI"
stop

# Interleaved: run 1 of every server, then run 2, ..., so drift on a shared machine
# hits all of them alike; the order rotates every run so that none always goes first.
declare -A WRUNS RRUNS
for run in $(seq "$RUNS"); do
  order=("${SERVERS[@]:$(((run - 1) % ${#SERVERS[@]}))}" "${SERVERS[@]:0:$(((run - 1) % ${#SERVERS[@]}))}")
  for mode in "${MODES[@]}"; do
    for name in "${order[@]}"; do
      start "$name" "$mode"
      w=$(measure nbdcopy "$DIR/src.img" "$URI")
      cmp -s "$DIR/src.img" "$DIR/dst.img" || { echo "bench-nbd-server: $name ($mode): data differs after the copy" >&2; exit 1; }
      r=$(measure nbdcopy "$URI" null:)
      stop
      WRUNS[$name.$mode]+="$w"$'\n'
      RRUNS[$name.$mode]+="$r"$'\n'
      echo "$name $mode run $run: write $w, read $r (seconds, server CPU seconds)" >&2
    done
  done
done
for mode in "${MODES[@]}"; do
  for name in "${SERVERS[@]}"; do
    WRITE[$name.$mode]=$(printf '%s' "${WRUNS[$name.$mode]}" | median)
    READ[$name.$mode]=$(printf '%s' "${RRUNS[$name.$mode]}" | median)
  done
done

label() {
  case $1 in
    sluice) echo "sluice (--threads $(nproc | awk '{print ($1 > 8) ? 8 : $1}'), the default)" ;;
    sluice-1-thread) echo "sluice --threads 1" ;;
    *) echo "$1" ;;
  esac
}
row() {  # name "seconds cpu" direction
  python3 -c "
s, c = map(float, '$2'.split())
print('| %s | %s | %.0f | %.2f |' % ('$(label "$1")', '$3', $SIZE / (1 << 20) / s, c / $GIB))"
}
TABLE=$(
  echo "| server | direction | MiB/s | server CPU s/GiB |"
  echo "|---|---|---|---|"
  for mode in "${MODES[@]}"; do
    t=; [ "$mode" = tls ] && t=", TLS"
    for name in "${SERVERS[@]}"; do row "$name" "${WRITE[$name.$mode]}" "nbdcopy file -> server$t"; done
    for name in "${SERVERS[@]}"; do row "$name" "${READ[$name.$mode]}" "nbdcopy server -> null:$t"; done
  done
)
MACHINE="$(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r); $(nbdcopy --version | head -1), $(nbdkit --version), $(qemu-nbd --version | head -1)"
COMMAND="tests/bench/bench-nbd-server.sh$([ $QUICK = 1 ] && echo ' --quick' || true) --runs $RUNS --size $SIZE"
REPORT=$(cat <<MD
Command: \`$COMMAND\` ($(date -u +%Y-%m-%d), median of $RUNS run(s); source and exported files on tmpfs, Unix sockets, nbdcopy defaults: multi-conn, 64 requests of 256 KiB per connection; TLS: PSK, TLS 1.3, each server's own TLS library (Sluice OpenSSL, nbdkit and qemu-nbd GnuTLS)).

Machine: $MACHINE.

$TABLE

$(python3 - "${WRITE[sluice.plain]}" "${WRITE[nbdkit.plain]}" "${WRITE[qemu-nbd.plain]}" \
    "${READ[sluice.plain]}" "${READ[nbdkit.plain]}" "${READ[qemu-nbd.plain]}" \
    "${WRITE[sluice.tls]}" "${WRITE[nbdkit.tls]}" "${WRITE[qemu-nbd.tls]}" \
    "${READ[sluice.tls]}" "${READ[nbdkit.tls]}" "${READ[qemu-nbd.tls]}" <<'PY'
import sys
rows = [tuple(map(float, a.split())) for a in sys.argv[1:]]
for i, what in enumerate(("writes", "reads", "TLS writes", "TLS reads")):
    (s, sc), peers = rows[3 * i], rows[3 * i + 1:3 * i + 3]
    best = min(peers)  # the faster peer: least seconds
    speed = best[0] / s
    ok = speed >= 1.2 and sc <= best[1]
    print("- %s: Sluice %.2fx the faster peer's throughput at %.2fx its server CPU (target >= 1.2x at <= 1x CPU: %s)"
          % (what, speed, sc / best[1], "met" if ok else "NOT met"))
PY
)
MD
)
echo "$REPORT"

if [ -z "$DOC" ]; then
  echo "not written into any doc (--quick or --no-docs; --output FILE writes it)" >&2
  exit 0
fi
[ -f "$DOC" ] || printf '# Benchmarks\n' >"$DOC"
if ! grep -q '<!-- bench-nbd-server:begin -->' "$DOC"; then
  printf '\n## NBD server\n\n<!-- bench-nbd-server:begin -->\n<!-- bench-nbd-server:end -->\n' >>"$DOC"
fi
python3 - "$DOC" "$REPORT" <<'PY'
import sys
path, report = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = '<!-- bench-nbd-server:begin -->', '<!-- bench-nbd-server:end -->'
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, 'w').write(head + begin + '\n' + report + '\n' + end + tail)
PY
echo "written to $DOC" >&2
