#!/bin/bash
# The whole test suite from a fresh Debian 12 machine: install what is missing, build,
# run every unit and integration test. Exits with the suite's status.
set -euo pipefail

source_root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$source_root/build}

"$source_root/tests/setup-debian.sh"
exec meson test -C "$build_dir" --print-errorlogs "$@"
