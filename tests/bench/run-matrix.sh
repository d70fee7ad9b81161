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
# emulation: this kernel has no netem). Optional tc tbf rate limit on the client's veth.
# Everything it creates (namespaces, veth, qdiscs, cgroups, processes, files in /dev/shm)
# is removed on exit, also on failure, Ctrl-C or SIGTERM; what a killed run (SIGKILL)
# left behind is removed by the next run. Every client, probe, read-back and wait has a
# time limit; servers, relays and samplers are stopped by the harness after each run.
#
#   --quick            smoke test: 64 MiB, 1 run, RTT 0 and 1 ms, arms A and C, the
#                      peers, and the reference writer's A and C; stops starting runs
#                      so as to end within its --budget (150 s); does not touch docs/
#                      unless --output is given
#   --runs N           runs per cell (default 3), arms interleaved, order rotating
#   --size SIZE        image size (default 1G; quick 64M), random data on tmpfs
#   --rtts LIST        comma-separated RTTs in ms; 0 means loopback (default 0,0.2,1,5,20)
#   --groups LIST      of nbd,nbd-tls,chunked,chunked-tls (default all four) and
#                      reference (a plain Python NBD writer with record-sized writes,
#                      arms A-D into nbdkit: checks that the rig shows the Nagle effect)
#   --only REGEX       only arms whose "group/tool>dest" matches, e.g. 'nbd/(sluice-[AC]|nbdcopy)>nbdkit'
#   --rate RATE        tc tbf rate on the client's veth, e.g. 10gbit (default: none;
#                      loopback cells are never limited)
#   --timeout S        per-run client limit in seconds (default 180; quick 15)
#   --budget S         wall-time limit for the whole invocation (default none; quick
#                      150): a round (every arm once at one RTT) is started only if it
#                      can end in time, counting each run at its worst case (every wait
#                      at its limit) and the report; a round cut short is left out
#   --sample-us N      TCP_INFO sampling interval, a target (default 1000)
#   --relay-sched S    fifo (default: the relay runs SCHED_FIFO priority 1, so a busy
#                      machine does not make it late) or normal
#   --results DIR      where the CSV and its metadata go (default tests/bench/results)
#   --output FILE      the markdown file to update (default docs/benchmarks.md)
#   --no-docs          do not touch docs/ (results go to a temporary dir unless --results)
#   --sluice PATH      the binary (default build/apps/sluice/sluice)
#   --arm-flags A=F    replace the flags of Sluice arm A (sluice, sluice-A..D) with F for
#                      an experiment, e.g. --arm-flags 'sluice-D=--depth 16'; repeatable;
#                      the CSV (column flags), the tables and "What ran" show the flags
#   --report CSV       only regenerate the section and plots from CSV (+ CSV's .json)
#   --check            exit 0 if root, namespaces and the tools are here; else say why
#
# Exit status: 0 when every run was attempted, succeeded and was verified; 1 when a run
# failed or an image did not match; 2 on a usage error; 3 when the machine cannot run
# the rig (not root, no namespaces); 4 when the time budget cut the matrix short (every
# run that ran was verified; the report marks the cells that lack runs).
set -uo pipefail

source_root=$(cd "$(dirname "$0")/../.." && pwd)
rig=$source_root/tests/bench/rig
PYTHON=/usr/bin/python3
command_line="tests/bench/run-matrix.sh${*:+ $*}"
started=$SECONDS # the time budget counts from the start

quick=false runs= size= rtts= groups= only= rate= run_timeout= budget= sample_us=1000
results_dir= output= no_docs=false sluice= report_csv= check_only=false relay_sched=fifo verify_timeout=
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

# --- cleanup: everything started is stopped ----------------------------------------------

# Set up before the first namespace exists. Names carry our PID (slb<PID>-*,
# sluice-matrix-<PID>.*), so that a later run can tell our leftovers from a live run's
# if a SIGKILL skips this.
tag=slb$$
pids=()
namespaces=()
work=
cgroup_dir=

# stop_all PID...: TERM to all at once, up to stop_grace s for all, then KILL. Only for
# children not yet reaped (a reaped PID may belong to someone else by now).
stop_all() {
  local pid i alive live=()
  for pid; do [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && live+=("$pid"); done
  ((${#live[@]})) || return 0
  kill -TERM "${live[@]}" 2>/dev/null
  # Polled often: every run stops three processes, which mostly exit at once.
  for ((i = 0; i < ${stop_grace:-3} * 50; i++)); do
    alive=false
    for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && alive=true; done
    $alive || break
    sleep 0.02
  done
  for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  for pid in "${live[@]}"; do wait "$pid" 2>/dev/null; done
  return 0
}
stop_pid() { stop_all "$1"; }

# remove_cgroup DIR: what runs in it was started by this harness (or a killed earlier
# run of it): kill it, then remove the cgroup and its children.
remove_cgroup() {
  local dir=$1 child pid
  [[ -d $dir ]] || return 0
  for child in "$dir"/*/; do
    [[ -d $child ]] || continue
    for pid in $(cat "$child/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  sleep 0.1
  for child in "$dir"/*/; do [[ -d $child ]] && rmdir "$child" 2>/dev/null; done
  rmdir "$dir" 2>/dev/null
}

cleanup() {
  local status=$? pid ns
  # Neither a second Ctrl-C nor a TERM may cut the cleanup short.
  trap '' INT TERM
  trap - EXIT
  stop_all "${pids[@]}"
  # Anything still inside our namespaces was started by us: stop it by its PID.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  # Only if they never reached their namespaces.
  [[ -n ${veth_a:-} ]] && ip link del "$veth_a" 2>/dev/null
  [[ -n ${veth_d:-} ]] && ip link del "$veth_d" 2>/dev/null
  [[ -n $cgroup_dir ]] && remove_cgroup "$cgroup_dir"
  [[ -n $work ]] && rm -rf -- "$work"
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

probe_ns=$tag-probe
namespaces+=("$probe_ns")
if ! ip netns add "$probe_ns" 2>/dev/null; then
  cannot "'ip netns add' does not work here (no network namespaces in this container?)"
fi
ip netns del "$probe_ns" 2>/dev/null
namespaces=()
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
  # 64 MiB take a second or two; the limits are sized so that the whole smoke test,
  # cleanup included, ends well inside CI's 170 s (.ci/run).
  run_timeout=${run_timeout:-15}
  budget=${budget:-150}
  calibration_seconds=2
  ping_count=10
  listen_wait=5 ready_wait=3 receiver_wait=5 report_timeout=10 verify_timeout=10
else
  runs=${runs:-3}
  size=${size:-1G}
  rtts=${rtts:-0,0.2,1,5,20}
  groups=${groups:-nbd,nbd-tls,chunked,chunked-tls}
  run_timeout=${run_timeout:-180}
  budget=${budget:-0}
  calibration_seconds=5
  ping_count=50
  listen_wait=10 ready_wait=5 receiver_wait=30 report_timeout=120
fi
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"
[[ $run_timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
[[ $budget =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"
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

# Every wait in a run has a limit, and the time budget counts a run at its worst case,
# all of them reached: a server listening, the relay and the sampler ready, the client
# and its kill, a Chunked receiver's exit after the sender's and its kill, reading the
# image back, and three stops (TERM, then KILL after stop_grace).
kill_grace=5 stop_grace=3
verify_timeout=${verify_timeout:-$run_timeout} # reading the image back
run_worst=$((listen_wait + 2 * ready_wait + run_timeout + kill_grace + receiver_wait + kill_grace + verify_timeout + 3 * stop_grace))
# Kept free at the end of the budget: the report and the cleanup.
reserve=$((report_timeout + 2 * stop_grace))

stamp=$(date -u +%Y%m%d-%H%M%S)
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
mode=full
$quick && mode=quick
# Quick runs leave docs alone unless an --output was asked for.
write_docs=true
if $no_docs || { $quick && [[ -z $output ]]; }; then write_docs=false; fi
# Results that a doc points at are kept in the repository; others only if asked.
if [[ -z $results_dir ]] && $write_docs; then results_dir=$source_root/tests/bench/results; fi

# --- leftovers of a killed run ----------------------------------------------------------

# A run killed with SIGKILL (CI's `timeout -k` once its grace is over) ran no cleanup.
# What it made carries its PID; whatever belongs to a PID that is no longer a
# run-matrix goes, with the processes still inside its namespaces or cgroups.
cgroup_root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
matrix_alive() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q run-matrix; }
sweep_stale() {
  local name pid p
  for name in $(ip netns list 2>/dev/null | cut -d' ' -f1); do
    [[ $name =~ ^slb([0-9]+)- || $name =~ ^slbprobe-([0-9]+)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    matrix_alive "$pid" && continue
    for p in $(ip netns pids "$name" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$name" 2>/dev/null && log "removed namespace $name, left behind by run $pid"
  done
  for name in $(ip -o link show 2>/dev/null | cut -d' ' -f2 | cut -d@ -f1 | tr -d :); do
    [[ $name =~ ^slb([0-9]+)[a-d]$ ]] && ! matrix_alive "${BASH_REMATCH[1]}" && ip link del "$name" 2>/dev/null
  done
  for name in /dev/shm/sluice-matrix-*; do
    [[ $name =~ /sluice-matrix-([0-9]+)\. ]] && ! matrix_alive "${BASH_REMATCH[1]}" && rm -rf -- "$name"
  done
  if [[ -n $cgroup_root ]]; then
    for name in "$cgroup_root"/slb*; do
      [[ ${name##*/} =~ ^slb([0-9]+)$ ]] && ! matrix_alive "${BASH_REMATCH[1]}" && remove_cgroup "$name"
    done
  fi
  return 0
}
sweep_stale

work=$(mktemp -d "/dev/shm/sluice-matrix-$$.XXXXXX") || die "cannot make a work directory in /dev/shm"
ns_lo=$tag-lo ns_a=$tag-a ns_b=$tag-b ns_c=$tag-c
veth_a=${tag}a veth_b=${tag}b veth_c=${tag}c veth_d=${tag}d
ip_a=10.231.0.1 ip_b=10.231.0.2 ip_b2=10.231.1.1 ip_c=10.231.1.2

# --- helpers -------------------------------------------------------------------------------

clk_tck=$(getconf CLK_TCK)
# cpu_seconds PID: user+system CPU of a live process (all its threads, in clock ticks:
# 10 ms steps). Only where there are no cgroups (see "CPU time" below).
cpu_seconds() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo ""; return; }
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  awk -v u="${f[11]}" -v s="${f[12]}" -v t="$clk_tck" 'BEGIN { printf "%.3f", (u + s) / t }'
}

# listening NS PORT: something listens on PORT in NS.
listening() { [[ -n $(ip netns exec "$1" timeout 5 ss -Hltn "sport = :$2" 2>/dev/null) ]]; }

# wait_listening NS PORT SECONDS: until something listens on PORT in NS.
wait_listening() {
  local ns=$1 port=$2 limit=$3 i
  for ((i = 0; i < limit * 50; i++)); do
    listening "$ns" "$port" && return 0
    sleep 0.02
  done
  return 1
}

# wait_listening_while PID NS PORT SECONDS: like wait_listening, giving up when PID exits.
wait_listening_while() {
  local pid=$1 ns=$2 port=$3 limit=$4 i
  for ((i = 0; i < limit * 50; i++)); do
    listening "$ns" "$port" && return 0
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

# Sets $port. Never call it inside $(...): a subshell's counter does not come back, and
# the next caller would get the same port again.
next_port=20000
take_port() { port=$next_port; next_port=$((next_port + 1)); }

digest() { timeout "$verify_timeout" openssl dgst -sha256 -r | cut -d' ' -f1; }

elapsed() { echo $((SECONDS - started)); }
# A run may start only if it ends in time even at its worst, the report included.
over_budget() { ((budget > 0 && SECONDS - started + run_worst + reserve > budget)); }
# round_fits SECONDS: a round that takes SECONDS (as the last one did) can still run all
# its runs within the budget.
round_fits() { ((budget == 0 || SECONDS - started + $1 + run_worst + reserve <= budget)); }

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
# ping endpoints get it too: they are the instrument measuring the path. So does the
# TCP_INFO sampler, whatever --relay-sched says: a dump that waits for a CPU comes late,
# and its weight (the gap) stands in for states nobody saw. (Most of the dumps it used
# to miss were the cost of each dump, though: see "namespaces" below.)
relay_prefix=() instrument_prefix=()
if chrt -f 1 true 2>/dev/null; then instrument_prefix=(chrt -f 1); else
  log "chrt -f 1 does not work here: the sampler runs with normal scheduling"
fi
if [[ $relay_sched == fifo ]]; then
  if ((${#instrument_prefix[@]})); then relay_prefix=(chrt -f 1); else
    log "chrt -f 1 does not work here: the relay runs with normal scheduling"
    relay_sched=normal
  fi
fi

# --- CPU time ---------------------------------------------------------------------------------

# Each side (client, server, relay) runs in a cgroup v2 of its own; its CPU time is the
# growth of that cgroup's cpu.stat usage_usec over the run: microseconds, every thread
# and child counted, also those that exited (a server's per-connection threads end with
# the connection). Without a writable cgroup v2 hierarchy: /usr/bin/time and
# /proc/PID/stat, in 10 ms clock ticks.
cpu_source="cgroup v2 cpu.stat usage_usec (microseconds)"
if [[ -n $cgroup_root ]] && mkdir "$cgroup_root/$tag" 2>/dev/null; then
  cgroup_dir=$cgroup_root/$tag
  mkdir "$cgroup_dir/client" "$cgroup_dir/server" "$cgroup_dir/relay" 2>/dev/null &&
    sh -c 'echo $$ >&3 && exec "$@" 3>&-' sh "${relay_prefix[@]}" true 3>"$cgroup_dir/relay/cgroup.procs" 2>/dev/null &&
    grep -q '^usage_usec ' "$cgroup_dir/relay/cpu.stat" 2>/dev/null || { remove_cgroup "$cgroup_dir"; cgroup_dir=; }
fi
if [[ -z $cgroup_dir ]]; then
  cpu_source="/usr/bin/time and /proc/PID/stat (clock ticks: 10 ms steps)"
  log "no usable cgroup v2 hierarchy: CPU times come from $cpu_source"
fi
# in_cgroup SIDE: sets cg_run to the words that start a command in SIDE's cgroup, and
# cg_procs to what the command's fd 3 must be opened on: its cgroup.procs, opened here
# because `ip netns exec` remounts /sys, hiding the cgroup tree from the command.
in_cgroup() {
  cg_run=() cg_procs=/dev/null
  [[ -n $cgroup_dir ]] && cg_run=(sh -c 'echo $$ >&3 && exec "$@" 3>&-' sh) cg_procs=$cgroup_dir/$1/cgroup.procs
  return 0
}
cg_usec() { [[ -n $cgroup_dir ]] && awk '$1 == "usage_usec" { print $2 }' "$cgroup_dir/$1/cpu.stat"; }
usec_delta() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", (b - a) / 1e6 }'; }

# --- namespaces -------------------------------------------------------------------------------

# client (ns_a) --veth-- relay, or a plain router (ns_b) --veth-- server (ns_c); both
# legs MTU 1500. The relay cells go client -> relay -> server; "direct" (calibration)
# goes through ns_b's kernel forwarding instead, over the same two links.
#
# The sampler's sock_diag dumps walk the namespace's whole TCP established hash table:
# the host's (262,144 buckets on the development machine) takes 2 to 6 ms a dump, so
# 1 ms samples were impossible. A namespace created from one whose
# net.ipv4.tcp_child_ehash_entries is set gets a table of its own of that size (Linux
# 6.1+): ns_b is made first and the others from inside it (nsenter, not `ip netns exec`,
# whose private mount namespace would hide the new namespace's mount).
log "setting up namespaces: $ns_lo (loopback); $ns_a <-> $ns_b <-> $ns_c (veth, MTU 1500${rate:+, tbf $rate})"
ip netns add "$ns_b" || die "ip netns add $ns_b failed"
namespaces+=("$ns_b")
own_hash=false
if command -v nsenter >/dev/null && ip netns exec "$ns_b" sysctl -qw net.ipv4.tcp_child_ehash_entries=4096 2>/dev/null; then
  own_hash=true
else
  log "no per-namespace TCP hash tables (nsenter missing or Linux < 6.1): the sampler's dumps walk the host's, and it will take far fewer samples than asked for"
fi
for ns in "$ns_lo" "$ns_a" "$ns_c"; do
  if $own_hash; then
    nsenter --net="/var/run/netns/$ns_b" ip netns add "$ns" || die "ip netns add $ns failed"
  else
    ip netns add "$ns" || die "ip netns add $ns failed"
  fi
  namespaces+=("$ns")
done
for ns in "$ns_lo" "$ns_a" "$ns_b" "$ns_c"; do ip -n "$ns" link set lo up || die "cannot bring up lo in $ns"; done
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
timeout 300 head -c "$size_bytes" /dev/urandom >"$source_image" || die "cannot write $source_image"
source_sha=$(digest <"$source_image")

certs=$work/certs
mkdir -p "$certs"
{
  timeout 30 openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$certs/ca-key.pem" -out "$certs/ca-cert.pem" -subj /CN=sluice-bench-ca &&
    timeout 30 openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$certs/server-key.pem" -out "$certs/server.csr" -subj /CN=localhost &&
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n' \
      "$ip_b,IP:$ip_c" >"$certs/ext.cnf" &&
    timeout 30 openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca-cert.pem" -CAkey "$certs/ca-key.pem" \
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
# --arm-flags: the arm keeps its name, so every row says which flags it ran with (CSV
# column flags) and the report titles changed arms by those flags, not the stock ones.
declare -A overridden=()
for override in "${arm_overrides[@]}"; do
  arm=${override%%=*}
  [[ $override == *=* && $arm =~ ^sluice(-[ABCD])?$ ]] || die "--arm-flags: want sluice or sluice-A..D=FLAGS, not '$override'"
  arm_flags[$arm]=${override#*=}
  overridden[$arm]=1
  log "arm $arm runs with '${arm_flags[$arm]}' (--arm-flags), not its stock flags"
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
  in_cgroup relay
  ip netns exec "$ns_b" "${cg_run[@]}" "${relay_prefix[@]}" "$relay" --listen "$ip_b:$2" --connect "$ip_c:$3" --rtt "$1" --quiet \
    --ready-file "$work/relay.ready" >"$work/relay.json" 2>"$work/relay.err" 3>"$cg_procs" &
  relay_pid=$!
  track "$relay_pid"
  wait_file "$work/relay.ready" "$ready_wait" || { log "relay did not start: $(cat "$work/relay.err")"; return 1; }
}
stop_relay() {
  stop_pid "$relay_pid"
  untrack "$relay_pid"
}

ratio_of() { "$PYTHON" -c 'import sys; a, b = sys.argv[1:]; print(f"{float(b) / float(a):.2f}" if a and b else "?")' "$1" "$2"; }

# nbd_rate direct|relay VAR: MiB/s of nbdcopy writing the image into nbdkit across the
# veth, into VAR (not printed: it takes ports, see take_port).
nbd_rate() {
  local how=$1 port_server port_client pid start end micros
  printf -v "$2" %s ""
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
      printf -v "$2" %s "$(awk -v b="$size_bytes" -v m="$micros" 'BEGIN { printf "%.0f", b / 1048576 / (m / 1e6) }')"
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
  nbd_rate direct nbd_direct
  nbd_rate relay nbd_relayed
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

# record KEY=VALUE...: one CSV row (matrix.py reads the run's files). Loopback cells are
# never rate-limited: their rows say rate=none whatever --rate was.
record() {
  local row_rate=${rate:-none} arg
  for arg; do [[ $arg == link=loopback ]] && row_rate=none; done
  "$PYTHON" "$rig/matrix.py" row "$csv" "date=$(date -u +%FT%TZ)" "size_bytes=$size_bytes" \
    "rate=$row_rate" "expected_sha256=$source_sha" "$@"
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

  local base=(rtt_ms="$rtt" link="$link" group="$group" tool="$tool" arm="$arm" dest="$dest" run="$run" order="$order"
    "flags=${arm_flags[$tool]:-}")
  local label=$arm
  [[ -n ${overridden[$tool]:-} ]] && label+=" [${arm_flags[$tool]}]"
  local destination=$work/destination.img
  rm -f "$destination"

  # The destination server.
  local server=() server_pid server_cpu="" server_time=$run_dir/server.time once=false
  local server_before client_before relay_before
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
      # Its timeout bounds the wait for its exit below (it signals its whole process
      # group): it may outlive the longest client by receiver_wait.
      server=(timeout -k "$kill_grace" "$((listen_wait + 2 * ready_wait + run_timeout + kill_grace + receiver_wait))")
      [[ -z $cgroup_dir ]] && server+=(/usr/bin/time -f '%e %U %S' -o "$server_time")
      server+=("$sluice" serve --protocol chunked
        --listen "$scheme://$server_host:$server_port" --output "$destination" --size "$size_bytes" --once)
      $tls && server+=(--tls-cert "$certs/server-cert.pem" --tls-key "$certs/server-key.pem")
      once=true
      ;;
  esac
  in_cgroup server
  # A Chunked receiver's timeout stays outside its cgroup: only the receiver is counted.
  if $once && [[ -n $cgroup_dir ]]; then
    server=("${server[@]:0:4}" "${cg_run[@]}" "${server[@]:4}")
    cg_run=()
  fi
  server_before=$(cg_usec server)
  ip netns exec "$server_ns" "${cg_run[@]}" "${server[@]}" >"$run_dir/server.out" 2>"$run_dir/server.err" 3>"$cg_procs" &
  server_pid=$!
  track "$server_pid"
  if ! wait_listening_while "$server_pid" "$server_ns" "$server_port" "$listen_wait"; then
    stop_pid "$server_pid"; untrack "$server_pid"
    record "${base[@]}" status=fail "note=server did not listen: $(head -c 300 "$run_dir/server.err" | tr '\n' ' ')"
    failures=$((failures + 1))
    return
  fi

  # The relay (veth cells).
  relay_before=$(cg_usec relay)
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

  ip netns exec "$client_ns" "${instrument_prefix[@]}" "$sampler" --port "$connect_port" --interval-us "$sample_us" \
    >"$run_dir/sampler.json" 2>"$run_dir/sampler.err" &
  local sampler_pid=$!
  track "$sampler_pid"
  # Its SIGTERM handler must be in place before the end of the run can stop it.
  wait_file "$run_dir/sampler.err" "$ready_wait" || log "the sampler did not start: the run will lack its TCP figures"

  # The client's CPU: its cgroup (timeout stays outside it), else /usr/bin/time.
  local wrapper=()
  in_cgroup client
  if [[ -n $cgroup_dir ]]; then wrapper=("${cg_run[@]}"); else wrapper=(/usr/bin/time -f '%e %U %S' -o "$run_dir/client.time"); fi
  client_before=$(cg_usec client)
  local start end status client_pid
  start=$EPOCHREALTIME
  # In the background and waited for: bash runs a trap only once a foreground command
  # returns, and a TERM (CI's timeout) must reach the cleanup now, not after --timeout.
  ip netns exec "$client_ns" timeout -k "$kill_grace" "$run_timeout" "${wrapper[@]}" \
    "${client[@]}" >"$run_dir/client.out" 2>"$run_dir/client.err" 3>"$cg_procs" &
  client_pid=$!
  track "$client_pid"
  wait "$client_pid"
  status=$?
  end=$EPOCHREALTIME
  untrack "$client_pid"

  # One-way Chunked: the sender is done when its last bytes are in a socket buffer (or
  # the relay's ring), the transfer when the receiver has written them and exits. Time
  # it to that exit; its own timeout bounds the wait.
  local receiver_status=0
  if $once && ((status == 0)); then
    wait "$server_pid"
    receiver_status=$?
    end=$EPOCHREALTIME
    untrack "$server_pid"
    server_pid= # reaped: nothing left to stop
  fi
  local micros=$((10#${end/./} - 10#${start/./}))
  local seconds
  seconds=$(printf '%d.%06d' $((micros / 1000000)) $((micros % 1000000)))
  local client_cpu
  client_cpu=$(usec_delta "$client_before" "$(cg_usec client)")

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
      if [[ -n $cgroup_dir ]]; then
        server_cpu=$(usec_delta "$server_before" "$(cg_usec server)")
      else
        read -r _ u s < <(tail -n1 "$server_time") && server_cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
      fi
    else
      $ok && note="receiver exit status $receiver_status: $(tail -c 300 "$run_dir/server.err" | tr '\n' ' ')"
      ok=false
    fi
  elif [[ -n $cgroup_dir ]]; then
    server_cpu=$(usec_delta "$server_before" "$(cg_usec server)")
  else
    server_cpu=$(cpu_seconds "$server_pid")
  fi
  local relay_cpu=""
  if [[ $link == veth ]]; then
    if [[ -n $cgroup_dir ]]; then relay_cpu=$(usec_delta "$relay_before" "$(cg_usec relay)"); else relay_cpu=$(cpu_seconds "$relay_pid"); fi
    stop_relay
  fi

  # Verify: the bytes the server received, hashed (in the background, as the client).
  if $ok; then
    case $dest in
      nbdkit)
        local read_uri=nbd://$server_host:$server_port/
        $tls && read_uri="nbds://$server_host:$server_port/?tls-certificates=$certs"
        { ip netns exec "$server_ns" timeout -k "$kill_grace" "$verify_timeout" nbdcopy "$read_uri" - | digest >"$run_dir/received"; } &
        ;;
      sluice)
        # Stopped first: a file is complete once its writer has gone.
        $once || { stop_pid "$server_pid"; untrack "$server_pid"; server_pid=; }
        digest <"$destination" >"$run_dir/received" &
        ;;
    esac
    wait $!
    received=$(cat "$run_dir/received" 2>/dev/null)
    if [[ $received != "$source_sha" ]]; then
      ok=false
      note="received image differs from the source (sha256 ${received:-not read})"
    fi
  fi
  stop_pid "$server_pid"; untrack "$server_pid"
  rm -f "$destination"

  local stats_file=""
  [[ $tool == sluice || $tool == sluice-* ]] && stats_file=$run_dir/client.out
  local result=ok
  $ok || { result=fail; failures=$((failures + 1)); }
  record "${base[@]}" status="$result" "note=$note" seconds="$seconds" \
    client_time_file="$run_dir/client.time" client_cpu_s="$client_cpu" sampler_file="$run_dir/sampler.json" \
    stats_file="$stats_file" relay_file="$([[ $link == veth ]] && echo "$work/relay.json")" \
    server_cpu_s="$server_cpu" relay_cpu_s="$relay_cpu" sha256="$received" "command=${client[*]}"
  local rate_text
  rate_text=$(awk -v b="$size_bytes" -v s="$seconds" 'BEGIN { printf "%.0f", b / 1048576 / s }')
  if $ok; then
    log "$(printf '%-7s %-30s run %d  %6ss  %6s MiB/s  verified' "$(rtt_label "$rtt")" "$label" "$run" "$seconds" "$rate_text")"
  else
    log "$(printf '%-7s %-30s run %d  FAILED: %s' "$(rtt_label "$rtt")" "$label" "$run" "$note")"
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

# The budget cuts whole rounds only (a round: every arm once at one RTT), so that every
# cell of an RTT has the same number of runs: a round starts only if, going by the
# last round's time (at this RTT, else the previous one), its last run can still end in
# time at its worst; a run starts only if it can. A round cut short all the same is
# left out: its rows are kept in the CSV with status "cut".
if ((budget > 0)); then
  log "time budget ${budget}s: runs start until $((budget - run_worst - reserve))s (a run's worst case is ${run_worst}s: ${run_timeout}s client limit, waits, kills and the read-back; ${reserve}s kept for the report and the cleanup)"
  ((budget - run_worst - reserve > 0)) || log "WARNING: the budget leaves no time for any run"
fi
budget_hit=false
declare -A rounds_done=() round_seconds=()
last_round=
n=${#runnable[@]}
for rtt in "${rtt_list[@]}"; do
  rounds_done[$rtt]=0
done
for rtt in "${rtt_list[@]}"; do
  for ((run = 1; run <= runs; run++)); do
    estimate=${round_seconds[$rtt]:-$last_round}
    if ((n > 0)) && [[ -n $estimate ]] && ! round_fits "$estimate"; then
      budget_hit=true
      break 2
    fi
    round_start=$SECONDS
    # Interleaved: every arm once per round, the order rotating each round.
    for ((i = 0; i < n; i++)); do
      arm=${runnable[(i + run - 1) % n]}
      if over_budget; then
        budget_hit=true
        ((i > 0)) && "$PYTHON" "$rig/matrix.py" cut "$csv" "$rtt" "$run"
        break 3
      fi
      run_one "$arm" "$rtt" "$run" "$((i + 1))"
    done
    last_round=$((SECONDS - round_start))
    ((last_round > ${round_seconds[$rtt]:-0})) && round_seconds[$rtt]=$last_round
    rounds_done[$rtt]=$run
  done
done
budget_text=""
if $budget_hit; then
  for rtt in "${rtt_list[@]}"; do budget_text+="${budget_text:+, }$(rtt_label "$rtt") ${rounds_done[$rtt]} of $runs"; done
  budget_text="the ${budget}s time budget cut the matrix short after $(elapsed)s: complete rounds per RTT: $budget_text"
fi

# --- the report --------------------------------------------------------------------------------

machine="$(nproc) CPUs ($(sed -n '/^model name/{s/^model name[[:space:]]*: //;p;q}' /proc/cpuinfo)), \
$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r); \
load average at the start $load_at_start"
versions="$("$sluice" --version); $(nbdkit --version); $(nbdcopy --version | head -n1); \
$(qemu-img --version | head -n1); $(iperf3 --version | head -n1); $(openssl version)"
meta=${csv%.csv}.json
unavailable_text=$(printf '%s\n' "${unavailable[@]}")
overrides_text=""
for tool in "${!overridden[@]}"; do overrides_text+="$tool=${arm_flags[$tool]}"$'\n'; done
image_text="$(numfmt --to=iec-i --suffix=B "$size_bytes") of random data on tmpfs (/dev/shm); destinations: nbdkit memory plugin, or sluice serve writing a file on tmpfs"
rig_text="RTT 0: loopback in a private namespace${rate:+ (not rate-limited)}; other RTTs: client and server in two namespaces, each joined by a veth pair (MTU 1500${rate:+, client link limited by tc tbf to $rate}) to a middle namespace where sluice-delay-relay holds each direction's bytes for RTT/2 (application-level RTT emulation; the kernel has no netem)"
sampler_text="the client's sockets' TCP_INFO through sock_diag, one dump every ${sample_us} us as a target"
((${#instrument_prefix[@]})) && sampler_text+=" at SCHED_FIFO 1"
$own_hash && sampler_text+=", in namespaces with their own 4,096-bucket TCP hash table (a dump of the host's 262,144-bucket table took 2-6 ms)"
sampler_text+="; each sample weighted by the time since the previous dump; final counters from sock_diag destroy notifications"
timeout "$report_timeout" "$PYTHON" - "$meta" "$calibration_json" "$command_line" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$mode" "$runs" \
  "$machine" "$versions" "$image_text" "$rig_text" "$source_root" "$unavailable_text" "$budget" "$budget_text" \
  "$cpu_source" "$sampler_text" "$sample_us" "$overrides_text" <<'EOF'
import json, sys
(meta_path, calibration_path, command, date, mode, runs, machine, versions, image, rig, source_root,
 unavailable, budget, budget_cut, cpu_source, sampler, sample_us, overrides) = sys.argv[1:]
overrides = dict(l.split("=", 1) for l in overrides.splitlines() if l)
commands = [
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
    f"Every run: a fresh server, relay and sampler; the client under `timeout`; CPU times from {cpu_source}; "
    f"TCP figures: {sampler}; then the received image hashed (nbdkit: read back with nbdcopy; files: hashed "
    "directly) and compared with the source's SHA-256",
]
if overrides:
    commands.insert(0, "**Changed for this run with `--arm-flags`** (these arms did not run their stock flags "
                    "above; the tables title them by the flags they ran): " +
                    "; ".join(f"{arm} ran `{flags or '(no flags)'}`" for arm, flags in sorted(overrides.items())))
meta = {
    "command": command, "date": date, "mode": mode, "runs": int(runs), "machine": machine,
    "versions": versions, "image": image, "rig": rig, "source_root": source_root,
    "unavailable": [l for l in unavailable.splitlines() if l],
    "budget_s": int(budget), "budget_cut": budget_cut, "cpu_source": cpu_source,
    "sample_interval_us": int(sample_us), "arm_overrides": overrides,
    "calibration": json.load(open(calibration_path)),
    "commands": commands,
}
json.dump(meta, open(meta_path, "w"), indent=1)
EOF

section=$work/section.md
if SOURCE_ROOT=$source_root timeout "$report_timeout" "$PYTHON" "$rig/matrix.py" report "$csv" "$meta" "$section" "$work/images" images; then
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
if $budget_hit; then
  log "=================================================================================="
  log "WARNING: INCOMPLETE MATRIX: $budget_text"
  log "cells with fewer runs than --runs are marked incomplete in the report; exit status 4"
  log "=================================================================================="
fi
((failures == 0)) || exit 1
$budget_hit && exit 4
exit 0
