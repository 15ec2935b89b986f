#!/usr/bin/env bash
# Runs a race_kernels_main mode (TSan build) and checks ThreadSanitizer's
# verdict: with markers, a "data race" report whose accesses name every
# marked line of broken_kernels.cc (a single marker must appear in both
# accesses); with --clean, no report at all.
#
#   check_tsan_race.sh BINARY MODE --clean
#   check_tsan_race.sh BINARY MODE MARKER [MARKER]   (MARKER: the text after "race-line: ")
set -uo pipefail
binary="$1"; mode="$2"; shift 2
source_file="$(dirname "${BASH_SOURCE[0]}")/broken_kernels.cc"

output="$(TSAN_OPTIONS="halt_on_error=0 ${TSAN_OPTIONS:-}" "$binary" "$mode" 2>&1)"
status=$?
echo "$output"

if [[ "$1" == "--clean" ]]; then
  if grep -q "ThreadSanitizer" <<<"$output" || [[ $status -ne 0 ]]; then
    echo "FAIL: $mode: expected no ThreadSanitizer report and exit 0 (exit $status)"
    exit 1
  fi
  echo "PASS: $mode: no report"
  exit 0
fi

if ! grep -q "WARNING: ThreadSanitizer: data race" <<<"$output"; then
  echo "FAIL: $mode: no ThreadSanitizer data race report"
  exit 1
fi
for marker in "$@"; do
  line="$(grep -n "race-line: $marker\$" "$source_file" | cut -d: -f1)"
  if [[ -z "$line" ]]; then
    echo "FAIL: marker '$marker' not found in $source_file"
    exit 1
  fi
  count="$(grep -c "broken_kernels.cc:$line" <<<"$output")"
  needed=1
  if [[ $# -eq 1 ]]; then needed=2; fi  # one line racing with itself: both accesses
  if [[ "$count" -lt "$needed" ]]; then
    echo "FAIL: $mode: the report names broken_kernels.cc:$line ($marker) $count times, expected >= $needed"
    exit 1
  fi
done
echo "PASS: $mode: data race reported at the marked lines"
