#!/usr/bin/env bash
# Creates .venv-lmeval/ in the repository root with lm-evaluation-harness
# (`lm-eval[api]`, PyPI; no torch: the `local-completions` model only talks
# HTTP) for tests/integration/lm_eval_test.py. Its own venv: lm-eval's
# dependencies (datasets, pandas, pyarrow, ...) need not agree with the test
# venv's pins. Idempotent and locked like setup-test-venv.sh.
# Usage: scripts/setup-lmeval-venv.sh   Prints the venv's lm-eval program.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-lmeval"
pins=("lm-eval[api]==0.4.13" "datasets==5.2.0")
stamp="$venv/pins.txt"
wanted="$(printf '%s\n' "${pins[@]}")"
ready() { "$venv/bin/lm-eval" --help >/dev/null 2>&1 && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; }
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
echo "$venv/bin/lm-eval"
