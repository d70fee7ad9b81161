#!/bin/bash
# run-matrix: the field's four-arm experiment (A stock, B NODELAY, C NODELAY + pipelining,
# D pipelining) for NBD and Chunked writes, plain and TLS, across round-trip times, with
# nbdcopy and qemu-img beside Sluice on the same cells (issue 6). docs/benchmark-rig.md
# explains the rig; docs/benchmarks.md gets the results.
#
#   tests/bench/run-matrix.sh [--quick] [options]        (needs root)
#   tests/bench/run-matrix.sh --report CSV [--output F]  (rewrite the doc from a CSV)
#   tests/bench/run-matrix.sh --check                    (can this machine run it?)
#
# The rig: RTT 0 runs on loopback inside a private namespace (the no-network baseline);
# every other RTT runs between two namespaces joined by a veth pair (MTU 1500), through
# sluice-delay-relay, which holds each direction's bytes for RTT/2 (application-level
# emulation: this kernel has no netem). Optional tc tbf rate limit on both veth ends.
# Everything it creates (namespaces, veth, qdiscs, processes, files in /dev/shm) is
# removed on exit, also on failure or Ctrl-C; every command runs under a timeout.
#
#   --quick            smoke test, under 3 minutes: 64 MiB, 1 run, RTT 0 and 1 ms, arms
#                      A and C, the peers, and the reference writer's A and C; does not
#                      touch docs/ unless --output is given
#   --runs N           runs per cell (default 3), arms interleaved, order rotating
#   --size SIZE        image size (default 1G; quick 64M), random data on tmpfs
#   --rtts LIST        comma-separated RTTs in ms; 0 means loopback (default 0,0.2,1,5,20)
#   --groups LIST      of nbd,nbd-tls,chunked,chunked-tls (default all four) and
#                      reference (a plain Python NBD writer with record-sized writes,
#                      arms A-D into nbdkit: checks that the rig shows the Nagle effect)
#   --only REGEX       only arms whose "group/tool>dest" matches, e.g. 'nbd/(sluice-[AC]|nbdcopy)>nbdkit'
#   --rate RATE        tc tbf rate on the veth, e.g. 10gbit (default: none)
#   --timeout S        per-run limit in seconds (default 180; quick 30)
#   --budget S         stop starting runs after S seconds (quick: 150)
#   --sample-us N      TCP_INFO sampling interval (default 1000)
#   --relay-sched S    fifo (default: the relay runs SCHED_FIFO priority 1, so a busy
#                      machine does not make it late) or normal
#   --results DIR      where the CSV and its metadata go (default tests/bench/results)
#   --output FILE      the markdown file to update (default docs/benchmarks.md)
#   --no-docs          do not touch docs/ (results go to a temporary dir unless --results)
#   --sluice PATH      the binary (default build/apps/sluice/sluice)
#   --arm-flags A=F    replace the flags of Sluice arm A (sluice, sluice-A..D) with F for
#                      an experiment, e.g. --arm-flags 'sluice-D=--depth 16'; repeatable;
#                      the results and the doc say which arms were changed
#   --report CSV       only regenerate the section and plots from CSV (+ CSV's .json)
#   --check            exit 0 if root, namespaces and the tools are here; else say why
#
# Exit status: 0 when every run that was attempted succeeded and was verified; 1 when a
# run failed or an image did not match; 2 on a usage error; 3 when the machine cannot
# run the rig (not root, no namespaces).
set -uo pipefail

source_root=$(cd "$(dirname "$0")/../.." && pwd)
rig=$source_root/tests/bench/rig
PYTHON=/usr/bin/python3
command_line="tests/bench/run-matrix.sh${*:+ $*}"

quick=false runs= size= rtts= groups= only= rate= run_timeout= budget= sample_us=1000
results_dir= output= no_docs=false sluice= report_csv= check_only=false relay_sched=fifo
arm_overrides=()

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; }
die() {
  echo "run-matrix: $*" >&2
  exit 1
}

while (($#)); do
  case $1 in
    --quick) quick=true ;;
    --runs) runs=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --rtts) rtts=${2:?}; shift ;;
    --groups) groups=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    --rate) rate=${2:?}; shift ;;
    --timeout) run_timeout=${2:?}; shift ;;
    --budget) budget=${2:?}; shift ;;
    --sample-us) sample_us=${2:?}; shift ;;
    --relay-sched) relay_sched=${2:?}; shift ;;
    --results) results_dir=${2:?}; shift ;;
    --output) output=${2:?}; shift ;;
    --no-docs) no_docs=true ;;
    --sluice) sluice=${2:?}; shift ;;
    --arm-flags) arm_overrides+=("${2:?}"); shift ;;
    --report) report_csv=${2:?}; shift ;;
    --check) check_only=true ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[run-matrix %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

docs_output=${output:-$source_root/docs/benchmarks.md}
images_dir=$(dirname "$docs_output")/images

# --- report only -----------------------------------------------------------------------

if [[ -n $report_csv ]]; then
  [[ -f $report_csv ]] || die "no such CSV: $report_csv"
  meta=${report_csv%.csv}.json
  section=$(mktemp)
  SOURCE_ROOT=$source_root "$PYTHON" "$rig/matrix.py" report "$report_csv" "$meta" "$section" "$images_dir" images ||
    die "report failed"
  "$PYTHON" "$rig/matrix.py" insert "$docs_output" "$section"
  cat "$section"
  rm -f "$section"
  log "written to $docs_output"
  exit 0
fi

# --- can this machine run it? ----------------------------------------------------------

cannot() {
  echo "run-matrix: cannot run here: $*" >&2
  exit 3
}

[[ $(id -u) -eq 0 ]] || cannot "needs root (network namespaces, veth pairs and tc qdiscs); run it as root, e.g. sudo $command_line"
for tool in ip tc ss nbdkit nbdcopy qemu-img iperf3 openssl gnuplot timeout /usr/bin/time "$PYTHON" g++; do
  command -v "$tool" >/dev/null 2>&1 || cannot "'$tool' is missing (Debian: iproute2 nbdkit libnbd-bin qemu-utils iperf3 openssl gnuplot-nox time g++)"
done
probe_ns=slbprobe-$$
if ! ip netns add "$probe_ns" 2>/dev/null; then
  cannot "'ip netns add' does not work here (no network namespaces in this container?)"
fi
ip netns del "$probe_ns" 2>/dev/null
if $check_only; then
  echo "run-matrix: this machine can run the rig (root, network namespaces, tools present)"
  exit 0
fi

# --- settings --------------------------------------------------------------------------

if $quick; then
  runs=${runs:-1}
  size=${size:-64M}
  rtts=${rtts:-0,1}
  groups=${groups:-nbd,nbd-tls,chunked,reference}
  only=${only:-'^(nbd/(sluice-[AC]|sluice|nbdcopy|qemu-img)>(nbdkit|sluice)|nbd-tls/(sluice|nbdcopy)>nbdkit|chunked/sluice-[AC]>sluice|reference/ref-[AC]>nbdkit)$'}
  run_timeout=${run_timeout:-30}
  budget=${budget:-150}
  calibration_seconds=2
  ping_count=10
else
  runs=${runs:-3}
  size=${size:-1G}
  rtts=${rtts:-0,0.2,1,5,20}
  groups=${groups:-nbd,nbd-tls,chunked,chunked-tls}
  run_timeout=${run_timeout:-180}
  budget=${budget:-0}
  calibration_seconds=5
  ping_count=50
fi
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"
[[ $relay_sched =~ ^(fifo|normal)$ ]] || die "--relay-sched is fifo or normal"
size_bytes=$(numfmt --from=iec "${size^^}") || die "--size: not a size: $size"
((size_bytes >= 1048576 && size_bytes % 1048576 == 0)) || die "--size must be a whole number of MiB"
IFS=, read -r -a rtt_list <<<"$rtts"
for r in "${rtt_list[@]}"; do [[ $r =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--rtts: not a number of ms: $r"; done
IFS=, read -r -a group_list <<<"$groups"
for g in "${group_list[@]}"; do
  [[ $g =~ ^(nbd|nbd-tls|chunked|chunked-tls|reference)$ ]] || die "--groups: unknown group $g"
done
sluice=${sluice:-$source_root/build/apps/sluice/sluice}
[[ -x $sluice ]] || die "no sluice binary at $sluice (build first: meson setup build && ninja -C build)"

started=$SECONDS
stamp=$(date -u +%Y%m%d-%H%M%S)
mode=full
$quick && mode=quick
# Quick runs leave docs alone unless an --output was asked for.
write_docs=true
if $no_docs || { $quick && [[ -z $output ]]; }; then write_docs=false; fi
# Results that a doc points at are kept in the repository; others only if asked.
if [[ -z $results_dir ]] && $write_docs; then results_dir=$source_root/tests/bench/results; fi

# --- cleanup: everything started is stopped ----------------------------------------------

work=$(mktemp -d /dev/shm/sluice-matrix.XXXXXX) || die "cannot make a work directory in /dev/shm"
tag=slb$$
ns_lo=$tag-lo ns_a=$tag-a ns_b=$tag-b ns_c=$tag-c
veth_a=${tag}a veth_b=${tag}b veth_c=${tag}c veth_d=${tag}d
ip_a=10.231.0.1 ip_b=10.231.0.2 ip_b2=10.231.1.1 ip_c=10.231.1.2
pids=()
namespaces=()

stop_pid() { # stop_pid PID: TERM, up to 3 s, then KILL
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 30; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

cleanup() {
  local status=$? pid ns
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  # Anything still inside our namespaces was started by us: stop it by its PID.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  ip link del "$veth_a" 2>/dev/null # only if they never reached their namespaces
  ip link del "$veth_c" 2>/dev/null
  rm -rf -- "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

track() { pids+=("$1"); }
untrack() {
  local keep=() p
  for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  pids=("${keep[@]}")
}

# --- helpers -------------------------------------------------------------------------------

clk_tck=$(getconf CLK_TCK)
# cpu_seconds PID: user+system CPU of a live process (all its threads).
cpu_seconds() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo ""; return; }
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  awk -v u="${f[11]}" -v s="${f[12]}" -v t="$clk_tck" 'BEGIN { printf "%.3f", (u + s) / t }'
}

# wait_listening NS PORT SECONDS: until something listens on PORT in NS.
wait_listening() {
  local ns=$1 port=$2 limit=$3 i
  for ((i = 0; i < limit * 50; i++)); do
    [[ -n $(ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null) ]] && return 0
    sleep 0.02
  done
  return 1
}

# wait_listening_while PID NS PORT SECONDS: like wait_listening, giving up when PID exits.
wait_listening_while() {
  local pid=$1 ns=$2 port=$3 limit=$4 i
  for ((i = 0; i < limit * 50; i++)); do
    [[ -n $(ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null) ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.02
  done
  return 1
}

wait_file() { # wait_file FILE SECONDS
  local i
  for ((i = 0; i < $2 * 50; i++)); do
    [[ -s $1 ]] && return 0
    sleep 0.02
  done
  return 1
}

next_port=20000
take_port() { port=$next_port; next_port=$((next_port + 1)); }

digest() { openssl dgst -sha256 -r | cut -d' ' -f1; }

elapsed() { echo $((SECONDS - started)); }
over_budget() { ((budget > 0 && SECONDS - started + run_timeout > budget)); }

# --- bench helpers (relay, sampler) ---------------------------------------------------------

relay=$source_root/build/tests/bench/sluice-delay-relay
sampler=$source_root/build/tests/bench/sluice-tcp-sampler
if [[ ! -x $relay || ! -x $sampler || $relay -ot $rig/delay_relay.cpp || $sampler -ot $rig/tcp_sampler.cpp ]]; then
  log "building the relay and the sampler (not found or older than their sources in build/)"
  relay=$work/sluice-delay-relay sampler=$work/sluice-tcp-sampler
  timeout 300 g++ -std=c++20 -O2 -Wall -Wextra -pthread -o "$relay" "$rig/delay_relay.cpp" || die "cannot build the relay"
  timeout 300 g++ -std=c++20 -O2 -Wall -Wextra -o "$sampler" "$rig/tcp_sampler.cpp" || die "cannot build the sampler"
fi

# A link does not wait for a CPU: real-time scheduling keeps the relay's releases on time
# when the client, the server and other work compete for the cores. The calibration's
# ping endpoints get it too: they are the instrument measuring the path.
relay_prefix=()
if [[ $relay_sched == fifo ]]; then
  if chrt -f 1 true 2>/dev/null; then relay_prefix=(chrt -f 1); else
    log "chrt -f 1 does not work here: the relay runs with normal scheduling"
    relay_sched=normal
  fi
fi

# --- namespaces -------------------------------------------------------------------------------

# client (ns_a) --veth-- relay, or a plain router (ns_b) --veth-- server (ns_c); both
# legs MTU 1500. The relay cells go client -> relay -> server; "direct" (calibration)
# goes through ns_b's kernel forwarding instead, over the same two links.
log "setting up namespaces: $ns_lo (loopback); $ns_a <-> $ns_b <-> $ns_c (veth, MTU 1500${rate:+, tbf $rate})"
for ns in "$ns_lo" "$ns_a" "$ns_b" "$ns_c"; do
  ip netns add "$ns" || die "ip netns add $ns failed"
  namespaces+=("$ns")
  ip -n "$ns" link set lo up || die "cannot bring up lo in $ns"
done
# veth_pair NS1 DEV1 ADDR1 NS2 DEV2 ADDR2
veth_pair() {
  ip link add "$2" mtu 1500 type veth peer name "$5" mtu 1500 &&
    ip link set "$2" netns "$1" && ip link set "$5" netns "$4" &&
    ip -n "$1" addr add "$3/30" dev "$2" && ip -n "$4" addr add "$6/30" dev "$5" &&
    ip -n "$1" link set "$2" up && ip -n "$4" link set "$5" up
}
veth_pair "$ns_a" "$veth_a" "$ip_a" "$ns_b" "$veth_b" "$ip_b" || die "cannot set up the client's veth pair"
veth_pair "$ns_b" "$veth_d" "$ip_b2" "$ns_c" "$veth_c" "$ip_c" || die "cannot set up the server's veth pair"
ip -n "$ns_a" route add default via "$ip_b" && ip -n "$ns_c" route add default via "$ip_b2" ||
  die "cannot route through $ns_b"
ip netns exec "$ns_b" sysctl -qw net.ipv4.ip_forward=1 || die "cannot enable forwarding in $ns_b"
if [[ -n $rate ]]; then
  # Burst: 1 ms at the rate, at least 64 KiB (a GSO packet must fit).
  rate_bits=$(numfmt --from=si "$(tr '[:lower:]' '[:upper:]' <<<"${rate%bit}")") || die "--rate: not a rate like 10gbit: $rate"
  burst=$((rate_bits / 8 / 1000))
  ((burst < 65536)) && burst=65536
  for side in "$ns_a $veth_a" "$ns_b $veth_b"; do
    read -r ns dev <<<"$side"
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 10ms ||
      die "tc tbf on $dev failed"
  done
fi

# --- image, certificates --------------------------------------------------------------------

source_image=$work/source.img
log "making a $(numfmt --to=iec-i --suffix=B "$size_bytes") image of random data on tmpfs"
head -c "$size_bytes" /dev/urandom >"$source_image" || die "cannot write $source_image"
source_sha=$(digest <"$source_image")

certs=$work/certs
mkdir -p "$certs"
{
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$certs/ca-key.pem" -out "$certs/ca-cert.pem" -subj /CN=sluice-bench-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$certs/server-key.pem" -out "$certs/server.csr" -subj /CN=localhost &&
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n' \
      "$ip_b,IP:$ip_c" >"$certs/ext.cnf" &&
    openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca-cert.pem" -CAkey "$certs/ca-key.pem" \
      -CAcreateserial -days 2 -extfile "$certs/ext.cnf" -out "$certs/server-cert.pem"
} >"$work/openssl.log" 2>&1 || die "cannot make the TLS certificates: $(cat "$work/openssl.log")"

# --- which Sluice parts exist ------------------------------------------------------------------

# The network protocols land on main one by one. A part that answers "not implemented"
# is left out of the matrix and named in the report; any other failure is a real
# failure and shows up in its runs.
unavailable=()
declare -A sluice_has
not_implemented() { grep -qi 'not implemented' "$1"; }
probe_client() { # probe_client NAME ARGS...: a client that cannot even try is not there
  local name=$1
  shift
  ip netns exec "$ns_lo" timeout 10 "$sluice" copy "$@" >"$work/probe.out" 2>&1
  if not_implemented "$work/probe.out"; then
    sluice_has[$name]=no
    unavailable+=("Sluice $name ($(head -n1 "$work/probe.out"))")
  else
    sluice_has[$name]=yes
  fi
}
probe_server() { # probe_server NAME ARGS...: listens, or says it cannot
  local name=$1 pid
  shift
  take_port
  ip netns exec "$ns_lo" "$sluice" serve --listen "tcp://127.0.0.1:$port" "$@" >"$work/probe.out" 2>&1 &
  pid=$!
  track "$pid"
  if wait_listening_while "$pid" "$ns_lo" "$port" 5; then
    sluice_has[$name]=yes
  elif not_implemented "$work/probe.out"; then
    sluice_has[$name]=no
    unavailable+=("Sluice $name ($(head -n1 "$work/probe.out"))")
  else
    sluice_has[$name]=yes # broken, not missing: let the runs say so
  fi
  stop_pid "$pid"
  untrack "$pid"
}
tiny=$work/tiny.img
head -c 1048576 /dev/urandom >"$tiny"
truncate -s 1M "$work/tiny-out.img"
probe_client "NBD client" --stats "$tiny" nbd://127.0.0.1:1/disk
probe_client "NBD client over TLS" --stats --tls-ca "$certs/ca-cert.pem" "$tiny" nbds://127.0.0.1:1/disk
probe_client "Chunked sender" --stats --protocol chunked "$tiny" tcp://127.0.0.1:1
probe_client "Chunked sender over TLS" --stats --protocol chunked --tls-ca "$certs/ca-cert.pem" "$tiny" tls://127.0.0.1:1
probe_server "NBD server" --protocol nbd --export "disk=$work/tiny-out.img"
probe_server "Chunked receiver" --protocol chunked --output "$work/tiny-out.img" --size 1M --once
for item in "${unavailable[@]}"; do log "not measured: $item"; done

# --- the arms ----------------------------------------------------------------------------------

# An arm is GROUP/TOOL>DEST. Sluice's four arms differ only in --depth and --no-nodelay,
# each on one connection like the field's writer; "sluice" is Sluice with no flags at
# all (its defaults, which open two connections where the server allows multi-conn),
# the arm the peers are compared with. Destination servers always run with their
# defaults.
declare -A arm_flags=(
  [sluice]=""
  [sluice-A]="--connections 1 --depth 1 --no-nodelay"
  [sluice-B]="--connections 1 --depth 1"
  [sluice-C]="--connections 1"
  [sluice-D]="--connections 1 --no-nodelay"
  [ref-A]="--depth 1"
  [ref-B]="--depth 1 --nodelay"
  [ref-C]="--depth 8 --nodelay"
  [ref-D]="--depth 8"
)
for override in "${arm_overrides[@]}"; do
  arm=${override%%=*}
  [[ $override == *=* && $arm =~ ^sluice(-[ABCD])?$ ]] || die "--arm-flags: want sluice or sluice-A..D=FLAGS, not '$override'"
  arm_flags[$arm]=${override#*=}
  log "arm $arm runs with '${arm_flags[$arm]}' (--arm-flags)"
done
arms=()
for group in "${group_list[@]}"; do
  case $group in
    nbd | nbd-tls)
      for dest in nbdkit sluice; do
        for tool in sluice-A sluice-B sluice-C sluice-D sluice nbdcopy qemu-img; do arms+=("$group/$tool>$dest"); done
      done
      ;;
    chunked | chunked-tls)
      for tool in sluice-A sluice-B sluice-C sluice-D; do arms+=("$group/$tool>sluice"); done
      ;;
    reference)
      for tool in ref-A ref-B ref-C ref-D; do arms+=("$group/$tool>nbdkit"); done
      ;;
  esac
done
if [[ -n $only ]]; then
  selected=()
  for arm in "${arms[@]}"; do [[ $arm =~ $only ]] && selected+=("$arm"); done
  arms=("${selected[@]}")
fi

# arm_missing ARM: why an arm cannot run (empty when it can).
arm_missing() {
  local group=${1%%/*} rest=${1#*/}
  local tool=${rest%%>*} dest=${rest#*>}
  local tls=no
  [[ $group == *-tls ]] && tls=yes
  if [[ $tool == sluice || $tool == sluice-* ]]; then
    case $group in
      nbd) [[ ${sluice_has["NBD client"]} == yes ]] || { echo "Sluice NBD client"; return; } ;;
      nbd-tls) [[ ${sluice_has["NBD client over TLS"]} == yes ]] || { echo "Sluice NBD client over TLS"; return; } ;;
      chunked) [[ ${sluice_has["Chunked sender"]} == yes ]] || { echo "Sluice Chunked sender"; return; } ;;
      chunked-tls) [[ ${sluice_has["Chunked sender over TLS"]} == yes ]] || { echo "Sluice Chunked sender over TLS"; return; } ;;
    esac
  fi
  if [[ $dest == sluice ]]; then
    case $group in
      nbd*) [[ ${sluice_has["NBD server"]} == yes ]] || { echo "Sluice NBD server"; return; } ;;
      chunked*) [[ ${sluice_has["Chunked receiver"]} == yes ]] || { echo "Sluice Chunked receiver"; return; } ;;
    esac
  fi
  : "$tls"
}

runnable=()
skipped_arms=()
for arm in "${arms[@]}"; do
  why=$(arm_missing "$arm")
  if [[ -z $why ]]; then runnable+=("$arm"); else skipped_arms+=("$arm|$why"); fi
done
((${#runnable[@]} + ${#skipped_arms[@]} > 0)) || die "no arm matches --groups/--only"
log "${#runnable[@]} arms to run, ${#skipped_arms[@]} left out; RTTs ${rtt_list[*]} ms; $runs run(s) each; image $size"

# --- calibration: the relay's cost at 0 ms, and the RTT each cell really has --------------------

declare -A measured_rtt
calibration_json=$work/calibration.json

iperf_rate() { # iperf_rate NS-CLIENT HOST PORT: Gbit/s received, from iperf3 -J
  ip netns exec "$1" timeout $((calibration_seconds + 20)) iperf3 -J -c "$2" -p "$3" -t "$calibration_seconds" 2>/dev/null |
    "$PYTHON" -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9, 3))' 2>/dev/null
}

start_relay() { # start_relay RTT LISTEN-PORT TARGET-PORT: relay in ns_b to the server's ns_c; sets relay_pid
  rm -f "$work/relay.ready" "$work/relay.json"
  ip netns exec "$ns_b" "${relay_prefix[@]}" "$relay" --listen "$ip_b:$2" --connect "$ip_c:$3" --rtt "$1" --quiet \
    --ready-file "$work/relay.ready" >"$work/relay.json" 2>"$work/relay.err" &
  relay_pid=$!
  track "$relay_pid"
  wait_file "$work/relay.ready" 5 || { log "relay did not start: $(cat "$work/relay.err")"; return 1; }
}
stop_relay() {
  stop_pid "$relay_pid"
  untrack "$relay_pid"
}

ratio_of() { "$PYTHON" -c 'import sys; a, b = sys.argv[1:]; print(f"{float(b) / float(a):.2f}" if a and b else "?")' "$1" "$2"; }

# nbd_rate direct|relay: MiB/s of nbdcopy writing the image into nbdkit across the veth.
nbd_rate() {
  local how=$1 port_server port_client pid start end micros
  take_port; port_server=$port
  take_port; port_client=$port
  local host=$ip_b
  [[ $how == direct ]] && host=$ip_c port_client=$port_server
  ip netns exec "$ns_c" nbdkit -f --exit-with-parent -i "$ip_c" -p "$port_server" memory "size=$size_bytes" >/dev/null 2>&1 &
  pid=$!; track "$pid"
  if wait_listening_while "$pid" "$ns_c" "$port_server" 10 && { [[ $how == direct ]] || start_relay 0 "$port_client" "$port_server"; }; then
    start=$EPOCHREALTIME
    if ip netns exec "$ns_a" timeout "$run_timeout" nbdcopy --flush "$source_image" "nbd://$host:$port_client/" >/dev/null 2>&1; then
      end=$EPOCHREALTIME
      micros=$((10#${end/./} - 10#${start/./}))
      awk -v b="$size_bytes" -v m="$micros" 'BEGIN { printf "%.0f", b / 1048576 / (m / 1e6) }'
    fi
    [[ $how == relay ]] && stop_relay
  fi
  stop_pid "$pid"; untrack "$pid"
}

# min_median_ms JSON: "MIN/MEDIAN" of a ping result. The minimum is the path's floor;
# the median adds the ping processes' own wake-up delays on a busy machine.
min_median_ms() { "$PYTHON" -c 'import json,sys; d = json.loads(sys.argv[1]); print("%.3f/%.3f" % (d["min_ms"], d["median_ms"]))' "$1" 2>/dev/null; }

calibrate() {
  local direct relayed lo_rate ratio port_server port_relay pid rtt result
  log "calibration: iperf3 for ${calibration_seconds}s each: loopback, veth routed, veth through the relay at 0 ms"
  take_port; port_server=$port
  ip netns exec "$ns_lo" timeout $((calibration_seconds + 30)) iperf3 -s -1 -B 127.0.0.1 -p "$port_server" >/dev/null 2>&1 &
  pid=$!; track "$pid"
  wait_listening "$ns_lo" "$port_server" 5 && lo_rate=$(iperf_rate "$ns_lo" 127.0.0.1 "$port_server")
  stop_pid "$pid"; untrack "$pid"

  take_port; port_server=$port
  ip netns exec "$ns_c" timeout $((calibration_seconds + 30)) iperf3 -s -1 -B "$ip_c" -p "$port_server" >/dev/null 2>&1 &
  pid=$!; track "$pid"
  wait_listening "$ns_c" "$port_server" 5 && direct=$(iperf_rate "$ns_a" "$ip_c" "$port_server")
  stop_pid "$pid"; untrack "$pid"

  take_port; port_server=$port
  take_port; port_relay=$port
  ip netns exec "$ns_c" timeout $((calibration_seconds + 30)) iperf3 -s -1 -B "$ip_c" -p "$port_server" >/dev/null 2>&1 &
  pid=$!; track "$pid"
  if wait_listening "$ns_c" "$port_server" 5 && start_relay 0 "$port_relay" "$port_server"; then
    relayed=$(iperf_rate "$ns_a" "$ip_b" "$port_relay")
    stop_relay
  fi
  stop_pid "$pid"; untrack "$pid"
  ratio=$(ratio_of "${direct:-}" "${relayed:-}")
  log "iperf3: loopback ${lo_rate:-?} Gbit/s; veth routed ${direct:-?} Gbit/s; through the relay at 0 ms ${relayed:-?} Gbit/s (ratio $ratio)"

  # The same for an NBD write of the image: nbdcopy into nbdkit, direct and relayed.
  local nbd_direct nbd_relayed nbd_ratio
  nbd_direct=$(nbd_rate direct)
  nbd_relayed=$(nbd_rate relay)
  nbd_ratio=$(ratio_of "${nbd_direct:-}" "${nbd_relayed:-}")
  log "nbdcopy -> nbdkit over the veth: routed ${nbd_direct:-?} MiB/s; through the relay at 0 ms ${nbd_relayed:-?} MiB/s (ratio $nbd_ratio)"

  # The application-level RTT of every cell: 64-byte ping-pongs through the same path.
  local echo_port
  for rtt in "${rtt_list[@]}"; do
    result='{}'
    take_port; echo_port=$port
    if [[ $(awk -v r="$rtt" 'BEGIN { print (r == 0) }') == 1 ]]; then
      ip netns exec "$ns_lo" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" echo --listen "127.0.0.1:$echo_port" >/dev/null 2>&1 &
      pid=$!; track "$pid"
      wait_listening "$ns_lo" "$echo_port" 5 &&
        result=$(ip netns exec "$ns_lo" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" ping --connect "127.0.0.1:$echo_port" --count "$ping_count")
    else
      ip netns exec "$ns_c" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" echo --listen "$ip_c:$echo_port" >/dev/null 2>&1 &
      pid=$!; track "$pid"
      take_port
      if wait_listening "$ns_c" "$echo_port" 5 && start_relay "$rtt" "$port" "$echo_port"; then
        result=$(ip netns exec "$ns_a" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" ping --connect "$ip_b:$port" --count "$ping_count")
        stop_relay
      fi
    fi
    stop_pid "$pid"; untrack "$pid"
    measured_rtt[$rtt]=$(min_median_ms "$result")
    log "RTT $rtt ms: measured ${measured_rtt[$rtt]:-?} ms (min/median of $ping_count 64-byte round trips, application to application)"
  done
  # Base: the two veth legs routed, no relay.
  result='{}'
  take_port; echo_port=$port
  ip netns exec "$ns_c" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" echo --listen "$ip_c:$echo_port" >/dev/null 2>&1 &
  pid=$!; track "$pid"
  wait_listening "$ns_c" "$echo_port" 5 &&
    result=$(ip netns exec "$ns_a" timeout 60 "${relay_prefix[@]}" "$PYTHON" "$rig/relay_probe.py" ping --connect "$ip_c:$echo_port" --count "$ping_count")
  stop_pid "$pid"; untrack "$pid"
  local base
  base=$(min_median_ms "$result")
  log "veth legs routed, without the relay: ${base:-?} ms"

  local rtt_text="" r
  for r in "${rtt_list[@]}"; do rtt_text+="${rtt_text:+, }$r -> ${measured_rtt[$r]:-?}"; done
  "$PYTHON" - "$calibration_json" "${lo_rate:-}" "${direct:-}" "${relayed:-}" "$ratio" "${base:-}" "$rtt_text" \
    "${nbd_direct:-}" "${nbd_relayed:-}" "$nbd_ratio" "$relay_sched" <<'EOF'
import json, sys
path, lo, direct, relayed, ratio, base, rtts, nbd_direct, nbd_relayed, nbd_ratio, sched = sys.argv[1:]
summary = (f"through the relay at 0 ms, nbdcopy -> nbdkit writes the image at {nbd_relayed or '?'} MiB/s against "
           f"{nbd_direct or '?'} MiB/s routed by the kernel over the same two veth legs ({nbd_ratio}x); iperf3, one stream: "
           f"{relayed or '?'} against {direct or '?'} Gbit/s ({ratio}x; loopback {lo or '?'} Gbit/s). "
           f"Relay scheduling: {'SCHED_FIFO 1' if sched == 'fifo' else 'normal'}. "
           f"Application-level RTT (64-byte ping-pong, min/median ms): routed, no relay {base or '?'}; "
           f"per cell, configured -> measured: {rtts}")
json.dump({"loopback_gbit": lo, "veth_direct_gbit": direct, "veth_relay0_gbit": relayed,
           "relay_ratio": ratio, "nbd_direct_mib_s": nbd_direct, "nbd_relay0_mib_s": nbd_relayed,
           "nbd_relay_ratio": nbd_ratio, "relay_sched": sched, "veth_rtt_ms": base, "rtts": rtts,
           "summary": summary}, open(path, "w"))
EOF
}

calibrate

# --- one run -----------------------------------------------------------------------------------

if [[ -n $results_dir ]]; then
  mkdir -p "$results_dir" || die "cannot create $results_dir"
  results_dir=$(cd "$results_dir" && pwd)
  csv=$results_dir/matrix-$mode-$stamp.csv
else
  csv=$work/matrix-$mode-$stamp.csv
fi
: >"$csv"
failures=0

# record KEY=VALUE...: one CSV row (matrix.py reads the run's files).
record() {
  "$PYTHON" "$rig/matrix.py" row "$csv" "date=$(date -u +%FT%TZ)" "size_bytes=$size_bytes" \
    "rate=${rate:-none}" "expected_sha256=$source_sha" "$@"
}

# run_one ARM RTT RUN ORDER
run_one() {
  local arm=$1 rtt=$2 run=$3 order=$4
  local group=${arm%%/*} rest=${arm#*/}
  local tool=${rest%%>*} dest=${rest#*>}
  local run_dir=$work/run
  rm -rf "$run_dir"
  mkdir -p "$run_dir"
  local tls=false
  [[ $group == *-tls ]] && tls=true
  local link=veth client_ns=$ns_a server_ns=$ns_c connect_host=$ip_b server_host=$ip_c
  local is_loopback
  is_loopback=$(awk -v r="$rtt" 'BEGIN { print (r == 0) }')
  if [[ $is_loopback == 1 ]]; then link=loopback client_ns=$ns_lo server_ns=$ns_lo connect_host=127.0.0.1 server_host=127.0.0.1; fi
  local server_port relay_port connect_port
  take_port; server_port=$port
  take_port; relay_port=$port
  connect_port=$server_port
  [[ $link == veth ]] && connect_port=$relay_port

  local base=(rtt_ms="$rtt" link="$link" group="$group" tool="$tool" arm="$arm" dest="$dest" run="$run" order="$order")
  local destination=$work/destination.img
  rm -f "$destination"

  # The destination server.
  local server=() server_pid server_cpu="" server_time=$run_dir/server.time once=false
  case $group/$dest in
    nbd*/nbdkit | reference/nbdkit)
      server=(nbdkit -f --exit-with-parent -i "$server_host" -p "$server_port")
      $tls && server+=(--tls=require "--tls-certificates=$certs")
      server+=(memory "size=$size_bytes")
      ;;
    nbd*/sluice)
      truncate -s "$size_bytes" "$destination"
      server=("$sluice" serve --protocol nbd --listen "tcp://$server_host:$server_port" --export "disk=$destination")
      $tls && server+=(--tls-cert "$certs/server-cert.pem" --tls-key "$certs/server-key.pem")
      ;;
    chunked*/sluice)
      truncate -s "$size_bytes" "$destination"
      local scheme=tcp
      $tls && scheme=tls
      # timeout bounds the wait for its exit below (it signals its whole process group).
      server=(timeout -k 5 "$((run_timeout + 30))" /usr/bin/time -f '%e %U %S' -o "$server_time" "$sluice" serve --protocol chunked
        --listen "$scheme://$server_host:$server_port" --output "$destination" --size "$size_bytes" --once)
      $tls && server+=(--tls-cert "$certs/server-cert.pem" --tls-key "$certs/server-key.pem")
      once=true
      ;;
  esac
  ip netns exec "$server_ns" "${server[@]}" >"$run_dir/server.out" 2>"$run_dir/server.err" &
  server_pid=$!
  track "$server_pid"
  if ! wait_listening_while "$server_pid" "$server_ns" "$server_port" 10; then
    stop_pid "$server_pid"; untrack "$server_pid"
    record "${base[@]}" status=fail "note=server did not listen: $(head -c 300 "$run_dir/server.err" | tr '\n' ' ')"
    failures=$((failures + 1))
    return
  fi

  # The relay (veth cells).
  if [[ $link == veth ]] && ! start_relay "$rtt" "$relay_port" "$server_port"; then
    stop_pid "$server_pid"; untrack "$server_pid"
    record "${base[@]}" status=fail "note=relay did not start"
    failures=$((failures + 1))
    return
  fi

  # The client.
  local client=() uri
  case $group/$tool in
    nbd/sluice | nbd-tls/sluice | nbd/sluice-* | nbd-tls/sluice-*)
      uri=nbd://$connect_host:$connect_port/disk
      $tls && uri=nbds://$connect_host:$connect_port/disk
      # shellcheck disable=SC2206 # the flags are words
      client=("$sluice" copy --stats ${arm_flags[$tool]})
      $tls && client+=(--tls-ca "$certs/ca-cert.pem")
      client+=("$source_image" "$uri")
      ;;
    chunked*/sluice-*)
      uri=tcp://$connect_host:$connect_port
      $tls && uri=tls://$connect_host:$connect_port
      # shellcheck disable=SC2206
      client=("$sluice" copy --stats --protocol chunked ${arm_flags[$tool]})
      $tls && client+=(--tls-ca "$certs/ca-cert.pem")
      client+=("$source_image" "$uri")
      ;;
    nbd*/nbdcopy)
      uri=nbd://$connect_host:$connect_port/disk
      $tls && uri="nbds://$connect_host:$connect_port/disk?tls-certificates=$certs"
      client=(nbdcopy --flush "$source_image" "$uri")
      ;;
    reference/ref-*)
      # shellcheck disable=SC2206
      client=("$PYTHON" "$rig/nbd_reference_writer.py" --connect "$connect_host:$connect_port" --image "$source_image"
        --export disk --write-size 16413 ${arm_flags[$tool]})
      ;;
    nbd*/qemu-img)
      client=(qemu-img convert -n -W -m 16 -t writeback -f raw)
      if $tls; then
        client+=(--object "tls-creds-x509,id=tls0,endpoint=client,dir=$certs" "$source_image" --target-image-opts
          "driver=raw,file.driver=nbd,file.server.type=inet,file.server.host=$connect_host,file.server.port=$connect_port,file.export=disk,file.tls-creds=tls0")
      else
        client+=(-O raw "$source_image" "nbd://$connect_host:$connect_port/disk")
      fi
      ;;
  esac

  ip netns exec "$client_ns" "$sampler" --port "$connect_port" --interval-us "$sample_us" >"$run_dir/sampler.json" 2>"$run_dir/sampler.err" &
  local sampler_pid=$!
  track "$sampler_pid"
  # Its SIGTERM handler must be in place before the end of the run can stop it.
  wait_file "$run_dir/sampler.err" 5 || log "the sampler did not start: the run will lack its TCP figures"

  local start end status
  start=$EPOCHREALTIME
  ip netns exec "$client_ns" timeout -k 5 "$run_timeout" /usr/bin/time -f '%e %U %S' -o "$run_dir/client.time" \
    "${client[@]}" >"$run_dir/client.out" 2>"$run_dir/client.err"
  status=$?
  end=$EPOCHREALTIME

  # One-way Chunked: the sender is done when its last bytes are in a socket buffer (or
  # the relay's ring), the transfer when the receiver has written them and exits. Time
  # it to that exit; its own timeout bounds the wait.
  local receiver_status=0
  if $once && ((status == 0)); then
    wait "$server_pid"
    receiver_status=$?
    untrack "$server_pid"
    end=$EPOCHREALTIME
  fi
  local micros=$((10#${end/./} - 10#${start/./}))
  local seconds
  seconds=$(printf '%d.%06d' $((micros / 1000000)) $((micros % 1000000)))

  stop_pid "$sampler_pid"; untrack "$sampler_pid"

  local note="" ok=true received=""
  if ((status != 0)); then
    ok=false
    ((status == 124)) && note="timed out after ${run_timeout}s; " || note="client exit status $status; "
    note+=$(tail -c 300 "$run_dir/client.err" | tr '\n' ' ')
  fi

  # The server's CPU; a Chunked receiver exits by itself once the image is written.
  if $once; then
    if ((receiver_status == 0)); then
      read -r _ u s < <(tail -n1 "$server_time") && server_cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
    else
      $ok && note="receiver exit status $receiver_status: $(tail -c 300 "$run_dir/server.err" | tr '\n' ' ')"
      ok=false
    fi
  else
    server_cpu=$(cpu_seconds "$server_pid")
  fi
  local relay_cpu=""
  if [[ $link == veth ]]; then
    relay_cpu=$(cpu_seconds "$relay_pid")
    stop_relay
  fi

  # Verify: the bytes the server received, hashed.
  if $ok; then
    case $dest in
      nbdkit)
        local read_uri=nbd://$server_host:$server_port/
        $tls && read_uri="nbds://$server_host:$server_port/?tls-certificates=$certs"
        received=$(ip netns exec "$server_ns" timeout "$run_timeout" nbdcopy "$read_uri" - | digest)
        ;;
      sluice)
        $once || stop_pid "$server_pid"
        received=$(digest <"$destination")
        ;;
    esac
    if [[ $received != "$source_sha" ]]; then
      ok=false
      note="received image differs from the source (sha256 $received)"
    fi
  fi
  stop_pid "$server_pid"; untrack "$server_pid"
  rm -f "$destination"

  local stats_file=""
  [[ $tool == sluice || $tool == sluice-* ]] && stats_file=$run_dir/client.out
  local result=ok
  $ok || { result=fail; failures=$((failures + 1)); }
  record "${base[@]}" status="$result" "note=$note" seconds="$seconds" \
    client_time_file="$run_dir/client.time" sampler_file="$run_dir/sampler.json" stats_file="$stats_file" \
    relay_file="$([[ $link == veth ]] && echo "$work/relay.json")" server_cpu_s="$server_cpu" relay_cpu_s="$relay_cpu" \
    sha256="$received" "command=${client[*]}"
  local rate_text
  rate_text=$(awk -v b="$size_bytes" -v s="$seconds" 'BEGIN { printf "%.0f", b / 1048576 / s }')
  if $ok; then
    log "$(printf '%-7s %-30s run %d  %6ss  %6s MiB/s  verified' "$(rtt_label "$rtt")" "$arm" "$run" "$seconds" "$rate_text")"
  else
    log "$(printf '%-7s %-30s run %d  FAILED: %s' "$(rtt_label "$rtt")" "$arm" "$run" "$note")"
  fi
}

rtt_label() { if [[ $(awk -v r="$1" 'BEGIN { print (r == 0) }') == 1 ]]; then echo loopback; else echo "$1ms"; fi; }

# --- the matrix --------------------------------------------------------------------------------

for entry in "${skipped_arms[@]}"; do
  for rtt in "${rtt_list[@]}"; do
    arm=${entry%%|*} why=${entry#*|}
    group=${arm%%/*} rest=${arm#*/}
    record rtt_ms="$rtt" link="$([[ $(rtt_label "$rtt") == loopback ]] && echo loopback || echo veth)" \
      group="$group" tool="${rest%%>*}" arm="$arm" dest="${rest#*>}" run=0 order=0 status=skipped "note=$why not available"
  done
done

budget_hit=false
n=${#runnable[@]}
for rtt in "${rtt_list[@]}"; do
  for ((run = 1; run <= runs; run++)); do
    # Interleaved: every arm once per round, the order rotating each round.
    for ((i = 0; i < n; i++)); do
      arm=${runnable[(i + run - 1) % n]}
      if over_budget; then
        budget_hit=true
        break 3
      fi
      run_one "$arm" "$rtt" "$run" "$((i + 1))"
    done
  done
done
$budget_hit && log "time budget of ${budget}s reached after $(elapsed)s: the remaining runs were not started"

# --- the report --------------------------------------------------------------------------------

machine="$(nproc) CPUs ($(sed -n '/^model name/{s/^model name[[:space:]]*: //;p;q}' /proc/cpuinfo)), \
$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r); \
load average at the start $(cut -d' ' -f1-3 /proc/loadavg)"
versions="$("$sluice" --version); $(nbdkit --version); $(nbdcopy --version | head -n1); \
$(qemu-img --version | head -n1); $(iperf3 --version | head -n1); $(openssl version)"
meta=${csv%.csv}.json
unavailable_text=$(printf '%s\n' "${unavailable[@]}")
$budget_hit && unavailable_text+=$'\n'"runs after the ${budget}s time budget"
image_text="$(numfmt --to=iec-i --suffix=B "$size_bytes") of random data on tmpfs (/dev/shm); destinations: nbdkit memory plugin, or sluice serve writing a file on tmpfs"
rig_text="RTT 0: loopback in a private namespace; other RTTs: client and server in two namespaces, each joined by a veth pair (MTU 1500${rate:+, client link limited by tc tbf to $rate}) to a middle namespace where sluice-delay-relay holds each direction's bytes for RTT/2 (application-level RTT emulation; the kernel has no netem)"
"$PYTHON" - "$meta" "$calibration_json" "$command_line" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$mode" "$runs" \
  "$machine" "$versions" "$image_text" "$rig_text" "$source_root" "$unavailable_text" <<'EOF'
import json, sys
(meta_path, calibration_path, command, date, mode, runs, machine, versions, image, rig, source_root,
 unavailable) = sys.argv[1:]
meta = {
    "command": command, "date": date, "mode": mode, "runs": int(runs), "machine": machine,
    "versions": versions, "image": image, "rig": rig, "source_root": source_root,
    "unavailable": [l for l in unavailable.splitlines() if l],
    "calibration": json.load(open(calibration_path)),
    "commands": [
        "Sluice NBD arms: `sluice copy --stats [ARM FLAGS] SRC nbd://HOST:PORT/disk` (TLS: `nbds://...` with "
        "`--tls-ca`); each arm on one connection (`--connections 1`, as the field's writer); A `--depth 1 "
        "--no-nodelay`, B `--depth 1`, C no other flags (2 MiB requests, NODELAY, the automatic depth: 8, more "
        "when the handshake measured a long round trip), D `--no-nodelay`; \"Sluice defaults\" is `sluice copy "
        "--stats SRC DEST` with no flags at all (two connections where the server offers multi-conn and is under "
        "0.5 ms away, else one), the arm the peers are measured against",
        "Sluice Chunked arms: `sluice copy --stats --protocol chunked [ARM FLAGS] SRC tcp://HOST:PORT` (TLS: "
        "`tls://`) into `sluice serve --protocol chunked --output FILE --size N --once`",
        "nbdcopy: `nbdcopy --flush SRC nbd://HOST:PORT/disk` (TLS: `nbds://...?tls-certificates=DIR`) with its "
        "defaults: up to 4 connections when the server offers multi-conn, 64 requests of 256 KiB in flight",
        "qemu-img: `qemu-img convert -n -W -m 16 -t writeback -f raw -O raw SRC nbd://HOST:PORT/disk` (TLS: "
        "`--object tls-creds-x509` and `--target-image-opts`); -t writeback so that it flushes at the end like "
        "the others",
        "Reference arms (a rig self-check, not a peer): `tests/bench/rig/nbd_reference_writer.py` writes 2 MiB "
        "requests, each a 28-byte header write and the payload in 16,413-byte writes (the field's TLS record "
        "writes); A `--depth 1`, B `--depth 1 --nodelay`, C `--depth 8 --nodelay`, D `--depth 8`",
        "nbdkit: `nbdkit -f -i HOST -p PORT memory size=N` (TLS: `--tls=require --tls-certificates=DIR`); "
        "Sluice's NBD server: `sluice serve --protocol nbd --listen tcp://HOST:PORT --export disk=FILE` "
        "(TLS: `--tls-cert --tls-key`); servers always run with their defaults",
        "Every run: a fresh server, relay and sampler; the client under `/usr/bin/time` and `timeout`; then the "
        "received image hashed (nbdkit: read back with nbdcopy; files: hashed directly) and compared with the "
        "source's SHA-256",
    ],
}
json.dump(meta, open(meta_path, "w"), indent=1)
EOF

section=$work/section.md
if SOURCE_ROOT=$source_root "$PYTHON" "$rig/matrix.py" report "$csv" "$meta" "$section" "$work/images" images; then
  cat "$section"
  if $write_docs; then
    mkdir -p "$images_dir"
    cp "$work"/images/*.png "$images_dir/" 2>/dev/null
    "$PYTHON" "$rig/matrix.py" insert "$docs_output" "$section"
    log "written to $docs_output and $images_dir"
  fi
else
  log "the report failed (the CSV is kept: $csv)"
  failures=$((failures + 1))
fi
if [[ -n $results_dir ]]; then
  log "raw results: $csv"
fi
log "done in $(elapsed)s: $failures failed run(s)"
((failures == 0)) || exit 1
exit 0
