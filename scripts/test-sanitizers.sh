#!/usr/bin/env bash
# The sanitizer jobs of CI, each in its own build dir with only the targets it
# runs (a sanitizer build of the whole tree would double CI's build time):
#
#   address  build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer (leaks
#            on; UBSan without its pointer checks, cmake/TandemSanitize.cmake)
#            over every unit test (CTest label unit), the CUDA emulation's
#            tests (cuda_emulation) and one cluster integration test with real
#            processes (migration_integration_test: a coordinator, two workers,
#            24 mixed streams, a SIGKILL; its load comes from the main
#            build's uninstrumented `tandem` when build/ has one). The
#            --device cuda model tests (cuda_device: whole models through
#            the emulator) run in the main build only.
#   thread   build-tsan/: ThreadSanitizer over the concurrency tests (label
#            tsan: scheduler, scheduler loops and request migration, the
#            worker-group pool, the service's request stream, the thread pool,
#            the thread communicator) and the CUDA emulation's tests. In the
#            emulation each CUDA thread is a TSan fiber and only barriers
#            order them, so a missing barrier is reported as a data race; the
#            cuda_emulation_tsan_* tests check that it is.
#
# Both compile at -Og with line tables only (-g1, cmake/TandemSanitize.cmake):
# reports keep file:line and the builds stay cheap. In both, the CPU kernels
# that models run (tandem_kernels) are compiled uninstrumented at -O2; under
# ASan the kernels' own tests link an instrumented copy
# (tandem_kernels_checked): kernels/CMakeLists.txt.
# Suppressions: none.
#
#   address-emulation  build-asan/: ASan + UBSan over the CUDA emulation's
#            tests only (a quick check while working on the emulation).
#
#   scripts/test-sanitizers.sh [--build-only] [thread|address|address-emulation]...
#   (default: thread address; --build-only configures and builds, runs nothing:
#   scripts/test.sh builds them so in the background while CTest runs)
# Env: JOBS (default: nproc).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
sanitizers=("$@")
if [ ${#sanitizers[@]} -eq 0 ]; then sanitizers=(thread address); fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # The tests' precompiled header (tests/pch): ccache caches such compiles only so.
  export CCACHE_SLOPPINESS=pch_defines,time_macros
fi

for sanitizer in "${sanitizers[@]}"; do
  extra_cmake=()
  case "$sanitizer" in
    thread)
      dir=build-tsan
      targets=(cuda_emulation_tests tsan_tests)
      labels='^(tsan|cuda_emulation)$'
      extra=() ;;
    address)
      dir=build-asan
      targets=(cuda_emulation_tests unit_tests tandem-coordinator tandem-worker)
      labels='^(unit|cuda_emulation)$'
      extra=(migration_integration_test)
      # The migration test's load generator (`tandem generate`) is not what
      # it checks: the main build's serves when there is one.
      if [ -x build/bin/tandem ]; then
        extra_cmake=(-DTANDEM_LOAD_CLIENT_BIN="$root/build/bin/tandem")
      else
        extra_cmake=(-DTANDEM_LOAD_CLIENT_BIN=)
        targets+=(tandem)
      fi ;;
    address-emulation)
      dir=build-asan
      targets=(cuda_emulation_tests)
      labels='^cuda_emulation$'
      extra=() ;;
    *) echo "unknown job '$sanitizer': expected thread, address or address-emulation" >&2
       exit 2 ;;
  esac
  if [ "$build_only" -eq 1 ]; then
    echo "== building for -fsanitize=$sanitizer ($dir/: ${targets[*]})"
  else
    echo "== tests under -fsanitize=$sanitizer ($dir/: ${targets[*]})"
  fi
  kind="${sanitizer%-emulation}"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE="$kind" \
    -DTANDEM_BUILD_BENCH=OFF "${launcher[@]}" "${extra_cmake[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
  if [ "$build_only" -eq 1 ]; then continue; fi
  # halt_on_error: the first report fails the test that caused it, except in
  # check_tsan_race.sh, which wants the whole report.
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  export ASAN_OPTIONS="detect_leaks=1"
  export UBSAN_OPTIONS="print_stacktrace=1"
  ctest --test-dir "$dir" -L "$labels" --output-on-failure -j "$jobs" --timeout 900
  # 24 mixed streams instead of 64: the same kinds of request and the same
  # kill, at a third of the instrumented processes' cost; the lost-for-good
  # cases (minutes of instrumented processes) run in the main build.
  for test in "${extra[@]}"; do
    TANDEM_MIGRATION_STREAMS=24 TANDEM_MIGRATION_LOST=0 \
      ctest --test-dir "$dir" -R "^${test}\$" --output-on-failure \
      --timeout 900
  done
done
