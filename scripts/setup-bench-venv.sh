#!/usr/bin/env bash
# Creates .venv-bench/ in the repository root with matplotlib (PyPI, pinned)
# for bench/plot_bench.py (scripts/pinned_venv.sh).
# Usage: scripts/setup-bench-venv.sh   Prints the venv's python.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/pinned_venv.sh"
pinned_venv "$root/.venv-bench" "import matplotlib" matplotlib==3.11.2
echo "$root/.venv-bench/bin/python"
