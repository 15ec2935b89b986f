#!/usr/bin/env bash
# Builds and runs the CUDA emulation's tests (CTest label cuda_emulation:
# the emulator's own tests, the broken-kernel checks, the kernels under
# emulation) under ThreadSanitizer in build-tsan/ and under AddressSanitizer
# + UndefinedBehaviorSanitizer in build-asan/. Only those targets are built
# there (target cuda_emulation_tests), which keeps this to a few minutes.
# In the TSan build each emulated CUDA thread is a TSan fiber and only
# barriers order them, so a missing barrier is reported as a data race; the
# cuda_emulation_tsan_* tests check that it is.
#
#   scripts/test-cuda-emulation-sanitizers.sh [thread|address]...   (default: both)
# Env: JOBS (default: nproc).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"
sanitizers=("$@")
if [ ${#sanitizers[@]} -eq 0 ]; then sanitizers=(thread address); fi

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

for sanitizer in "${sanitizers[@]}"; do
  case "$sanitizer" in
    thread) dir=build-tsan ;;
    address) dir=build-asan ;;
    *) echo "unknown sanitizer '$sanitizer': expected thread or address" >&2; exit 2 ;;
  esac
  echo "== CUDA emulation tests under -fsanitize=$sanitizer ($dir/)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE="$sanitizer" \
    -DTANDEM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs" --target cuda_emulation_tests
  # halt_on_error: the first report fails the test that caused it, except in
  # check_tsan_race.sh, which wants the whole report.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ASAN_OPTIONS="detect_leaks=1" \
  UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$dir" -L cuda_emulation --output-on-failure -j "$jobs" --timeout 600
done
