#!/usr/bin/env bash
# The time budget scripts/test.sh prints at its end, so growth is visible: the
# N slowest tests (default 10) in each build dir given (default build
# build-tsan build-asan), read from the dir's
# Testing/Temporary/CTestCostData.txt ("name runs seconds" per test: CTest's
# running average, which is the one run's time in CI's clean clone), with the
# dir as the job's name; then each dir's total.
#   scripts/test-times.sh [-n N] [DIR...]
set -euo pipefail
export LC_ALL=C  # printf's %f reads "12.5" whatever the locale
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
count=10
if [ "${1:-}" = "-n" ]; then count="$2"; shift 2; fi
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then dirs=(build build-tsan build-asan); fi
rows=()
for dir in "${dirs[@]}"; do
  data="$dir/Testing/Temporary/CTestCostData.txt"
  [ -f "$data" ] || continue
  # Lines before "---" are tests; the rest lists the failed ones.
  while read -r name _ seconds; do
    [ "$name" = "---" ] && break
    rows+=("$(printf '%10.1f  %-12s %s' "$seconds" "$dir" "$name")")
  done <"$data"
done
if [ ${#rows[@]} -eq 0 ]; then echo "no CTest timings found in: ${dirs[*]}"; exit 0; fi
echo "== the $count slowest tests (seconds, job, test)"
printf '%s\n' "${rows[@]}" | sort -rn | head -n "$count" || true
echo "== seconds of test time per job (tests run in parallel: more than wall time)"
printf '%s\n' "${rows[@]}" | awk '{t[$2] += $1} END {for (d in t) printf "%10.1f  %s\n", t[d], d}' | sort -rn
