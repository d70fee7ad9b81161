#!/bin/bash
# Runs the libFuzzer targets for longer than meson test does, one after another at
# low priority (the fuzzers are single-threaded; CPU is shared):
#
#   tests/fuzz/run-long.sh SECONDS [TARGET...]      # default: every target
#
# Needs the fuzz build (docs/fuzzing.md): BUILD_DIR, default build-fuzz. Inputs that
# found new coverage are kept in BUILD_DIR/tests/fuzz/long-corpus/TARGET, so a second
# run goes on from the first; crashing inputs land in BUILD_DIR/tests/fuzz/crashes/.
# Prints, per target, the CPU seconds used, the executions and the coverage reached;
# exits non-zero if any target found something.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-$here/../../build-fuzz}
[[ $# -ge 1 && $1 =~ ^[0-9]+$ ]] || { echo "usage: $0 SECONDS [TARGET...]" >&2; exit 2; }
seconds=$1
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  for dir in "$here"/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
logs=$build/tests/fuzz/long-logs
mkdir -p "$logs"
failed=0
for name in "${targets[@]}"; do
  binary=$build/tests/fuzz/${name}_fuzzer
  [[ -x $binary ]] || { echo "$name: $binary not built (ninja -C $build)" >&2; exit 2; }
  flags=()
  [[ $name == http_* ]] && flags=(-max_len=70000)  # as tests/fuzz/meson.build
  status=0
  FUZZ_CORPUS_DIR=$build/tests/fuzz/long-corpus/$name \
    /usr/bin/time -f '%U %S' -o "$logs/$name.time" \
    nice -n 10 "$here/run-target.sh" "$binary" "$here/corpus/$name" "$seconds" "${flags[@]}" \
    >"$logs/$name.log" 2>&1 || status=$?
  read -r user system <"$logs/$name.time"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$name.log")
  coverage=$(grep -o 'cov: [0-9]*' "$logs/$name.log" | tail -1)
  verdict=ok
  if ((status != 0)); then
    verdict="FOUND SOMETHING (see $logs/$name.log)"
    failed=1
  fi
  printf '%-22s cpu %6.0f s  runs %-10s %-10s %s\n' "$name" "$(awk "BEGIN { print $user + $system }")" "${runs:-?}" \
    "${coverage:-}" "$verdict"
done
exit "$failed"
