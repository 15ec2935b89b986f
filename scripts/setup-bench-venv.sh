#!/usr/bin/env bash
# Creates .venv-bench/ in the repository root with matplotlib (PyPI, pinned)
# for bench/plot_bench.py. Idempotent and locked like setup-test-venv.sh.
# Usage: scripts/setup-bench-venv.sh   Prints the venv's python.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-bench"
pins=("matplotlib==3.11.2")
stamp="$venv/pins.txt"
wanted="$(printf '%s\n' "${pins[@]}")"
ready() { "$venv/bin/python" -c "import matplotlib" 2>/dev/null && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; }
if ! ready; then
  exec 9<"${BASH_SOURCE[0]}"
  flock 9
  if ! ready; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
    printf '%s\n' "$wanted" >"$stamp"
  fi
fi
echo "$venv/bin/python"
