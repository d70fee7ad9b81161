#!/bin/sh
# Runs one libFuzzer target for a bounded time over its seed corpus:
#   run-target.sh TARGET SEED_DIR SECONDS [libFuzzer flags...]
# The seeds are only read. New inputs go to $FUZZ_CORPUS_DIR if set (run-long.sh
# keeps them between runs), else to a temporary directory removed afterwards. A
# crashing input is saved next to the target, in crashes/, and the run fails.
set -eu
target=$1 seeds=$2 seconds=$3
shift 3
name=$(basename "$target")
crashes=$(dirname "$target")/crashes
mkdir -p "$crashes"
if [ -n "${FUZZ_CORPUS_DIR:-}" ]; then
  corpus=$FUZZ_CORPUS_DIR
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
fi
# libFuzzer's own exit code for a finding is 77, which meson reads as a skip: every
# finding (crash, timeout, leak, out of memory) exits 1 instead.
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
  -print_final_stats=1 -artifact_prefix="$crashes/$name-" "$@" "$corpus" "$seeds"
