#!/usr/bin/env bash
# Sets up dependencies, configures (CMake >= 3.25, C++20) and builds tandem into
# build/ (binaries in build/bin/). CUDA parts turn on when nvcc is found.
# Usage: scripts/build.sh [extra cmake args...]   Env: JOBS (default: nproc)
# Every test is built too unless an argument says
# -DTANDEM_SANITIZED_TESTS_IN_ALL=OFF (scripts/test.sh: the unit and CUDA
# emulation tests run in the sanitizer jobs there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup-deps.sh
jobs="${JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DTANDEM_SANITIZED_TESTS_IN_ALL=ON "$@" >/dev/null
cmake --build build -j "$jobs"
echo "build: binaries in $root/build/bin"
