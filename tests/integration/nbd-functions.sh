# Shared helpers for the NBD client tests (tests/integration/nbd-*.sh), which run
# `sluice copy` against real servers: nbdkit, qemu-nbd, nbd-server. Each test sources
# this first:
#
#   . "$(dirname "$0")/nbd-functions.sh"
#
# Conventions: a failed assertion prints "FAIL: ..." and exits 1; a test whose peer is
# not installed prints "SKIP: why" and exits 77. Servers started here are stopped and
# everything created lives in $scratch, removed on exit, whatever happens.

# The common helpers (log, fail, skip, requires, on_exit, $scratch, files, cmp).
. "$(dirname "${BASH_SOURCE[0]}")/functions.sh"

# nbdsh and nbdinfo's helpers are Debian's: the first python3 on PATH may lack
# python3-libnbd.
export PATH=/usr/bin:/usr/sbin:$PATH
# In a sanitizer build, undefined behaviour must fail the run, not print and go on.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# requires_nbdkit_plugin NAME / requires_nbdkit_filter NAME
requires_nbdkit_plugin() {
  nbdkit "$1" --dump-plugin >/dev/null 2>&1 || skip "nbdkit plugin '$1' is not installed"
}
requires_nbdkit_filter() {
  nbdkit --filter="$1" null --dump-plugin >/dev/null 2>&1 || skip "nbdkit filter '$1' is not installed"
}

# --- files -----------------------------------------------------------------------

# sparse_image FILE SIZE [OFFSET LENGTH]...: a sparse file with random data at the
# given places.
sparse_image() {
  local file=$1 size=$2
  shift 2
  rm -f -- "$file"
  truncate -s "$(to_bytes "$size")" -- "$file"
  while (($# >= 2)); do
    head -c "$(to_bytes "$2")" /dev/urandom |
      dd of="$file" bs=64K seek="$(to_bytes "$1")" oflag=seek_bytes conv=notrunc iflag=fullblock status=none
    shift 2
  done
}

# same_prefix A B: B begins with all of A (an export may be larger than the image).
same_prefix() {
  cmp -n "$(size_of "$1")" -- "$1" "$2" >/dev/null 2>&1 ||
    fail "$2 does not begin with $1: $(cmp -n "$(size_of "$1")" -- "$1" "$2" 2>&1 | sed -n 1p)"
}

# read_export URI FILE: the export's bytes into FILE, read by libnbd (not by sluice).
read_export() {
  rm -f -- "$2"
  nbdcopy -- "$1" "$2" || fail "nbdcopy could not read back $1"
}

# --- running sluice --------------------------------------------------------------

out=
err=
status=0
# run_sluice ARGS...: runs sluice under a watchdog (a hang is a failure, not a stuck
# test suite); stdout and stderr land in $out and $err, the exit status in $status.
run_sluice() {
  status=0
  timeout --kill-after=10 "${SLUICE_TIMEOUT:-120}" "$SLUICE" "$@" >"$scratch/.stdout" 2>"$scratch/.stderr" || status=$?
  out=$(cat "$scratch/.stdout")
  err=$(cat "$scratch/.stderr")
  if ((status == 124 || status == 137)); then
    printf '%s\n' "--- stderr:" "$err" >&2
    fail "'sluice $*' hung (killed after ${SLUICE_TIMEOUT:-120} s)"
  fi
}

# expect_copy ARGS...: `sluice copy --stats ARGS...` exits 0.
expect_copy() {
  run_sluice copy --stats "$@"
  if ((status != 0)); then
    printf '%s\n' "--- stdout:" "$out" "--- stderr:" "$err" >&2
    fail "'sluice copy $*' exited $status, expected 0"
  fi
}

# expect_failure MESSAGE ARGS...: `sluice ARGS...` exits 1 and stderr contains MESSAGE
# (a fixed string). Also checks that the failure was reported as one error line.
expect_failure() {
  local message=$1
  shift
  run_sluice "$@"
  if ((status != 1)); then
    printf '%s\n' "--- stdout:" "$out" "--- stderr:" "$err" >&2
    fail "'sluice $*' exited $status, expected 1"
  fi
  [[ $err == *"$message"* ]] || fail "'sluice $*': stderr lacks '$message'; it said: $err"
  [[ $(grep '^sluice: ' <<<"$err" | grep -vc '^sluice: note:' || true) -eq 1 ]] ||
    fail "'sluice $*': expected one error line, got: $err"
}

# stat_field KEY: one field of the last --stats JSON printed (in $out).
stat_field() {
  "$PYTHON" -c 'import json, sys; print(json.loads(sys.argv[1].strip().splitlines()[-1]).get(sys.argv[2], ""))' "$out" "$1"
}

# assert_default_connections URI: the last copy, to URI's server (which advertises
# multi-conn) with no --connections, opened what the client's rule asks for: two
# connections over a Unix socket, or over TCP when the handshake measured the server at
# most 0.5 ms away, else one (ExportClient::add_connections). A loaded machine under the
# sanitizers has measured loopback TCP at 4 ms, and the client must then follow its own
# rule. Sets default_connections to the number it expected (not printed: a failure in
# a command substitution would end only the subshell).
assert_default_connections() {
  local rt
  rt=$(stat_field round_trip_us)
  default_connections=2
  [[ $1 == nbd+unix://* || $1 == nbds+unix://* ]] || default_connections=$((rt > 500 ? 1 : 2))
  assert_eq "connections to $1 (round trip $rt us)" "$(stat_field connections)" "$default_connections"
}

# --- servers ---------------------------------------------------------------------

# kill_when_busy LOG WHAT PID: kills PID (-9) once its nbdkit log filter's LOG shows
# requests of kind WHAT in progress, so the copy is surely in the middle (a delay
# filter keeps it there). Run it in the background beside the copy.
kill_when_busy() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q " $2 id=" "$1" 2>/dev/null && break
    sleep 0.05
  done
  sleep 0.2
  kill -9 "$3"
}

# free_port: a TCP port nobody listens on right now.
free_port() {
  "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/free_port.py"
}

# wait_for_file FILE [SECONDS]
wait_for_file() {
  local i
  for ((i = 0; i < ${2:-10} * 20; i++)); do
    [[ -s $1 ]] && return 0
    sleep 0.05
  done
  return 1
}

# stop_pidfile FILE: stops the server whose pid is in FILE and waits for it to go.
stop_pidfile() {
  local pid i
  [[ -s $1 ]] || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
}

# nbdkit_unix NAME NBDKIT-ARGS...: nbdkit on $scratch/NAME.sock; sets $uri to its
# nbd+unix:// URI. nbdkit writes its pid file once it accepts connections.
nbdkit_unix() {
  local name=$1
  shift
  local sock=$scratch/$name.sock pidfile=$scratch/$name.pid
  nbdkit -U "$sock" -P "$pidfile" "$@" || fail "nbdkit $* did not start"
  on_exit "stop_pidfile '$pidfile'"
  wait_for_file "$pidfile" || fail "nbdkit $* wrote no pid file"
  uri="nbd+unix:///?socket=$sock"
  pidfile_of_last=$pidfile
}

# nbdkit_tcp NAME NBDKIT-ARGS...: nbdkit on a free loopback port; sets $port and $uri.
nbdkit_tcp() {
  local name=$1
  shift
  local pidfile=$scratch/$name.pid
  port=$(free_port)
  nbdkit -i 127.0.0.1 -p "$port" -P "$pidfile" "$@" || fail "nbdkit $* did not start"
  on_exit "stop_pidfile '$pidfile'"
  wait_for_file "$pidfile" || fail "nbdkit $* wrote no pid file"
  uri="nbd://127.0.0.1:$port/"
  pidfile_of_last=$pidfile
}

# qemu_nbd_tcp NAME QEMU-NBD-ARGS...: qemu-nbd on a free port, forked once ready and
# serving client after client (--persistent); sets $port and $pidfile_of_last.
qemu_nbd_tcp() {
  local name=$1
  shift
  local pidfile=$scratch/$name.pid
  port=$(free_port)
  qemu-nbd --fork --persistent --pid-file="$pidfile" -b 127.0.0.1 -p "$port" "$@" || fail "qemu-nbd $* did not start"
  on_exit "stop_pidfile '$pidfile'"
  wait_for_file "$pidfile" || fail "qemu-nbd $* wrote no pid file"
  pidfile_of_last=$pidfile
}

# qemu_nbd_unix NAME QEMU-NBD-ARGS...: qemu-nbd on $scratch/NAME.sock.
qemu_nbd_unix() {
  local name=$1
  shift
  local pidfile=$scratch/$name.pid
  qemu-nbd --fork --persistent --pid-file="$pidfile" -k "$scratch/$name.sock" "$@" || fail "qemu-nbd $* did not start"
  on_exit "stop_pidfile '$pidfile'"
  wait_for_file "$pidfile" || fail "qemu-nbd $* wrote no pid file"
  pidfile_of_last=$pidfile
}

# make_pki DIR: a CA, a server certificate for localhost and 127.0.0.1, and a client
# certificate, with the names libnbd, nbdkit and qemu expect, made with the openssl CLI.
make_pki() {
  local dir=$1
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca-key.pem \
      -out ca-cert.pem -days 2 -subj "/CN=Sluice test CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server-key.pem \
      -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
      'extendedKeyUsage=serverAuth' 'keyUsage=digitalSignature,keyEncipherment' >server.ext
    openssl x509 -req -in server.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
      -out server-cert.pem -days 2 -extfile server.ext 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client-key.pem \
      -out client.csr -subj "/CN=sluice" 2>/dev/null
    printf '%s\n' 'basicConstraints=CA:FALSE' 'extendedKeyUsage=clientAuth' \
      'keyUsage=digitalSignature,keyEncipherment' >client.ext
    openssl x509 -req -in client.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
      -out client-cert.pem -days 2 -extfile client.ext 2>/dev/null
    chmod 644 ./*.pem
  ) || fail "could not make test certificates in $dir"
}
