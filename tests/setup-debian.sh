#!/bin/bash
# Installs what Sluice's build and every test need on Debian 12 (as root), then
# configures and builds. Safe to run again: apt runs only when a package is missing,
# meson setup only when the build directory is not configured yet.
#
#   tests/setup-debian.sh            # build in ./build
#   BUILD_DIR=build-x tests/setup-debian.sh
#   SLUICE_WERROR=1 tests/setup-debian.sh   # warnings are errors (CI)
set -euo pipefail

source_root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$source_root/build}

packages=(
  # build
  meson ninja-build g++ clang pkg-config
  # clang's libFuzzer and sanitizer runtimes, for the fuzz build (docs/fuzzing.md)
  libclang-rt-14-dev
  libasio-dev liburing-dev libssl-dev doctest-dev libexpected-dev
  # real peers for the integration tests and the benchmarks
  nbdkit libnbd-bin python3-libnbd qemu-utils nbd-server openssl
  # independent VHD readers (libvhdi) for the VHD tests
  python3-libvhdi libvhdi-utils
  # what the test scripts themselves run: strace (io_uring check), losetup/mount
  # (block devices, a full filesystem), setpriv/runuser (an unprivileged user),
  # Debian's python3 (JSON and extent checks), iproute2/iperf3 (network tests),
  # gnuplot and /usr/bin/time (benchmarks), curl (a plain HTTP import client), binutils
  # (nm, readelf: the C library's export list)
  strace util-linux mount python3 coreutils diffutils iproute2 iperf3 gnuplot-nox time curl binutils
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ $status == installed ]] || missing+=("$package")
done

if ((${#missing[@]} > 0)); then
  echo "setup-debian: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || {
      echo "setup-debian: missing packages (${missing[*]}) and not root; run as root" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
else
  echo "setup-debian: all ${#packages[@]} packages present"
fi

if [[ ! -f $build_dir/build.ninja ]]; then
  # Warnings fail the build only when asked (CI does): a user on a newer compiler
  # should get a working build with a warning, not none.
  meson setup "$build_dir" "$source_root" ${SLUICE_WERROR:+-Dwerror=true}
fi
ninja -C "$build_dir" ${SLUICE_JOBS:+-j "$SLUICE_JOBS"}
