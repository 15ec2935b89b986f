#!/usr/bin/env bash
# Soak test of a tandem cluster (not in CI): bench/soak/soak.py in the
# integration tests' venv (.venv-test: tandem_client, grpcio, openai; set up
# by scripts/setup-test-venv.sh), drawing OUT/soak.png with the benchmarks'
# venv (.venv-bench: matplotlib; scripts/setup-bench-venv.sh). Without
# .venv-bench (no PyPI here) it still runs and writes OUT/soak.json; the plot
# can be drawn later: .venv-bench/bin/python bench/soak/plot_soak.py OUT/soak.json OUT/soak.png
# Usage: bench/soak/run.sh [soak.py flags: --streams N --duration-s D
#        --kill-interval-s K --out DIR --model GGUF --bin-dir DIR ...]
# Needs build/bin/tandem-coordinator and tandem-worker (scripts/build.sh).
# All traffic stays on 127.0.0.1. Exit status: soak.py's (0 pass, 1 fail,
# 2 the cluster did not start).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="$(bash "$root/scripts/setup-test-venv.sh" | tail -n 1)"
plot=()
if bench_py="$(bash "$root/scripts/setup-bench-venv.sh" | tail -n 1)"; then
  plot=(--plot-python "$bench_py")
else
  echo "run.sh: no .venv-bench (scripts/setup-bench-venv.sh failed): no soak.png" >&2
fi
exec "$py" "$root/bench/soak/soak.py" "${plot[@]}" "$@"
