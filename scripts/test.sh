#!/usr/bin/env bash
# Sets up, builds, fetches the default model and runs every test: CTest in
# build/ (integration, the CUDA device tests, bounded fuzzing), then the
# sanitizer jobs (scripts/test-sanitizers.sh, their own build dirs): the
# concurrency and CUDA emulation tests under TSan; every unit test, the CUDA
# emulation tests and a cluster integration test under ASan + UBSan. The unit
# and emulation tests run only there (build/ leaves them out:
# TANDEM_SANITIZED_TESTS_IN_ALL), and the sanitizer builds compile while CTest
# runs (below): CI's budget is 40 minutes on 2 cores. This is what .ci/run
# runs. CTest itself sets up the integration tests' Python (.venv-test/,
# scripts/setup-test-venv.sh) and their gRPC stubs (build/python/) first: see
# tests/integration/.
#
# At the end, pass or fail, it prints each stage's wall time and the slowest
# tests (scripts/test-times.sh), so CI's growth toward its limit is visible.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stages=()
stage() {  # stage NAME COMMAND...: runs COMMAND, recording its wall time
  local name="$1" start=$SECONDS status=0
  shift
  "$@" || status=$?
  if [ "$status" -ne 0 ]; then name="$name (failed, exit $status)"; fi
  stages+=("$(printf '%6d s  %s' $((SECONDS - start)) "$name")")
  return "$status"
}
report() {
  echo "== stage wall times (of ${SECONDS} s in all)"
  if [ ${#stages[@]} -gt 0 ]; then printf '%s\n' "${stages[@]}"; fi
  bash scripts/test-times.sh || true
}
trap report EXIT
# No GPU here: nvcc (when present) compiles the kernels for Hopper only.
stage build bash scripts/build.sh -DTANDEM_SANITIZED_TESTS_IN_ALL=OFF -DTANDEM_CUDA_ARCHITECTURES=90
stage fetch-model bash scripts/fetch-model.sh >/dev/null
# The sanitizer builds compile meanwhile at the lowest priority, taking only
# the time CTest's tests leave idle (server start-up, probes, drains; little:
# on CI's 2 cores most of them still build after CTest). Its log is
# build/sanitizer-builds.log; a failure there shows again, and fails, in the
# tsan or asan stage, which builds what is left and runs the tests. It runs
# in its own session, so that a failed CTest stops all of it; where the
# kernel groups a session's processes for scheduling (autogroup), nice works
# only within the group, so the group itself is set to nice 19 as well.
setsid bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null || true
  exec nice -n 19 bash scripts/test-sanitizers.sh --build-only thread address' \
  > build/sanitizer-builds.log 2>&1 &
prebuild=$!
stage ctest ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900 || {
  status=$?; kill -- "-$prebuild" 2>/dev/null || true; wait "$prebuild" || true; exit "$status"; }
wait "$prebuild" ||
  echo "== the background sanitizer builds failed (build/sanitizer-builds.log); again below"
stage tsan bash scripts/test-sanitizers.sh thread
stage asan bash scripts/test-sanitizers.sh address
