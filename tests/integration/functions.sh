# Shared helpers for the integration tests; each test sources this first:
#
#   . "$(dirname "$0")/functions.sh"
#
# Conventions: a failed assertion prints "FAIL: ..." and exits 1; a test that cannot
# run here (no root, no loop devices) prints "SKIP: why" and exits 77, which meson
# reports as skipped. Everything a test creates lives in $scratch, removed on exit.

set -euo pipefail

test_name=$(basename "$0" .sh)
tests_dir=$(cd "$(dirname "$0")" && pwd)
SOURCE_ROOT=${SOURCE_ROOT:-$(cd "$tests_dir/../.." && pwd)}
BUILD_ROOT=${BUILD_ROOT:-$SOURCE_ROOT/build}
SLUICE=${SLUICE:-$BUILD_ROOT/apps/sluice/sluice}
# Debian's interpreter, not whatever python3 comes first on PATH: the tests use only
# its standard library.
PYTHON=/usr/bin/python3
. "$(dirname "${BASH_SOURCE[0]}")/listening.sh"

log() { printf '%s: %s\n' "$test_name" "$*" >&2; }

fail() {
  printf 'FAIL: %s: %s\n' "$test_name" "$*" >&2
  exit 1
}

skip() {
  printf 'SKIP: %s: %s\n' "$test_name" "$*" >&2
  exit 77
}

# requires CMD...: skip unless every command exists.
requires() {
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 || skip "'$cmd' is not installed (tests/setup-debian.sh installs it)"
  done
}

requires_root() {
  [[ $(id -u) -eq 0 ]] || skip "${1:-this test} needs root"
}

# --- cleanup ---------------------------------------------------------------------

cleanup_actions=()

# on_exit COMMAND: run COMMAND (a string for eval) when the test exits, last
# registered first, whether it passed, failed or was interrupted.
on_exit() { cleanup_actions+=("$1"); }

run_cleanup() {
  local status=$? i
  trap - EXIT
  for ((i = ${#cleanup_actions[@]} - 1; i >= 0; i--)); do
    eval "${cleanup_actions[i]}" >/dev/null 2>&1 || true
  done
  [[ -n ${scratch:-} && -d $scratch ]] && rm -rf -- "$scratch"
  exit "$status"
}
trap run_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- scratch directory -----------------------------------------------------------

# /var/tmp rather than /tmp: /tmp is often a tmpfs, too small for the images and not
# representative of the disks images live on.
scratch=$(mktemp -d "${SLUICE_TEST_TMPDIR:-/var/tmp}/sluice-$test_name.XXXXXX")

[[ -x $SLUICE ]] || fail "no sluice binary at '$SLUICE' (set SLUICE or build first)"

# --- files -----------------------------------------------------------------------

# allocated_bytes FILE: bytes the filesystem has allocated to FILE (st_blocks).
allocated_bytes() {
  local blocks unit
  read -r blocks unit < <(stat -c '%b %B' -- "$1")
  echo $((blocks * unit))
}

size_of() { stat -c %s -- "$1"; }

# data_map FILE: the file's data extents as "offset length" lines, from SEEK_DATA /
# SEEK_HOLE, computed independently of sluice.
data_map() {
  "$PYTHON" - "$1" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
pos = 0
while pos < size:
    try:
        start = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:  # ENXIO: only a hole remains
        break
    end = os.lseek(fd, start, os.SEEK_HOLE)
    print(start, end - start)
    pos = end
EOF
}

# data_bytes FILE: bytes in FILE's data extents (what SEEK_DATA calls data).
data_bytes() {
  data_map "$1" | awk '{ n += $2 } END { print n + 0 }'
}

# holes_supported DIR: true when files in DIR can have holes that SEEK_HOLE reports.
holes_supported() {
  local probe=$1/.hole-probe
  truncate -s 8M "$probe"
  write_random "$probe" 4M 64K
  local map
  map=$(data_map "$probe")
  rm -f "$probe"
  [[ $map == "4194304 65536" ]]
}

# to_bytes SIZE: 4K / 2M / 1G (powers of 1024) or plain bytes.
to_bytes() {
  local n=${1%[KkMmGg]}
  case $1 in
    *[Kk]) echo $((n << 10)) ;;
    *[Mm]) echo $((n << 20)) ;;
    *[Gg]) echo $((n << 30)) ;;
    *) echo "$1" ;;
  esac
}

# write_random FILE OFFSET LENGTH: random bytes at OFFSET, the rest of FILE untouched.
write_random() {
  local offset length
  offset=$(to_bytes "$2")
  length=$(to_bytes "$3")
  head -c "$length" /dev/urandom |
    dd of="$1" bs=1M seek="$offset" oflag=seek_bytes conv=notrunc iflag=fullblock status=none
}

# write_zeros FILE OFFSET LENGTH: explicit (allocated) zeros at OFFSET.
write_zeros() {
  local offset length
  offset=$(to_bytes "$2")
  length=$(to_bytes "$3")
  head -c "$length" /dev/zero |
    dd of="$1" bs=1M seek="$offset" oflag=seek_bytes conv=notrunc iflag=fullblock status=none
}

# sparse_file FILE SIZE: an all-hole file of SIZE bytes.
sparse_file() {
  rm -f -- "$1"
  truncate -s "$(to_bytes "$2")" -- "$1"
}

# random_file FILE SIZE: SIZE bytes of random data, fully allocated.
random_file() {
  head -c "$(to_bytes "$2")" /dev/urandom >"$1"
}

# under_strace STRACE-ARGS... -- cmd...: strace a command. LeakSanitizer cannot run
# under ptrace, so a sanitizer build is traced with leak detection off.
under_strace() {
  local args=()
  while [[ $1 != -- ]]; do
    args+=("$1")
    shift
  done
  shift
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace "${args[@]}" "$@"
}

# --- assertions ------------------------------------------------------------------

# same_content A B: byte-identical and the same length (cmp fails on a prefix too).
same_content() {
  cmp -- "$1" "$2" >/dev/null 2>&1 || fail "$2 differs from $1: $(cmp -- "$1" "$2" 2>&1 | sed -n 1p)"
}

# expect_status CODE cmd...: run cmd (stdout and stderr kept in $out / $err) and
# assert its exit status.
out=
err=
expect_status() {
  local want=$1 status=0
  shift
  "$@" >"$scratch/.stdout" 2>"$scratch/.stderr" || status=$?
  out=$(cat "$scratch/.stdout")
  err=$(cat "$scratch/.stderr")
  if [[ $status -ne $want ]]; then
    printf '%s\n' "--- stdout:" "$out" "--- stderr:" "$err" >&2
    fail "'$*' exited $status, expected $want"
  fi
}

# expect_ok cmd...: exit 0.
expect_ok() { expect_status 0 "$@"; }

# expect_fail CODE MESSAGE cmd...: exit CODE and stderr contains MESSAGE (a fixed
# string).
expect_fail() {
  local code=$1 message=$2
  shift 2
  expect_status "$code" "$@"
  [[ $err == *"$message"* ]] || fail "'$*': stderr lacks '$message'; it said: $err"
}

# json_field JSON KEY: one field of a JSON object; KEY may name a nested one (plan.lanes).
json_field() {
  "$PYTHON" -c '
import functools, json, sys
print(functools.reduce(lambda v, k: v[k], sys.argv[2].split("."), json.loads(sys.argv[1])))' "$1" "$2"
}

# wait_until_open PID FILE: waits (up to 20 s) until process PID holds FILE open, which
# for sluice copy means its signal handlers are in place and the source is sized. False
# when PID ended first or time ran out; a fixed sleep instead raced the sanitizer
# build's slow start.
wait_until_open() {
  local pid=$1 file fd tries
  file=$(readlink -f "$2")
  for ((tries = 0; tries < 400; tries++)); do
    for fd in /proc/"$pid"/fd/*; do
      [[ $(readlink "$fd" 2>/dev/null) == "$file" ]] && return 0
    done
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# assert_eq WHAT GOT WANT
assert_eq() {
  [[ $2 == "$3" ]] || fail "$1: got '$2', expected '$3'"
}

# assert_le WHAT A B: integer A <= B
assert_le() {
  (($2 <= $3)) || fail "$1: $2 > $3"
}
