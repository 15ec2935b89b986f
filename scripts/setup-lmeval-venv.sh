#!/usr/bin/env bash
# Creates .venv-lmeval/ in the repository root with lm-evaluation-harness
# (`lm-eval[api]`, PyPI; no torch: the `local-completions` model only talks
# HTTP) for tests/integration/lm_eval_test.py (scripts/pinned_venv.sh). Its
# own venv: lm-eval's dependencies (datasets, pandas, pyarrow, ...) need not
# agree with the test venv's pins.
# Usage: scripts/setup-lmeval-venv.sh   Prints the venv's lm-eval program.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/pinned_venv.sh"
pinned_venv "$root/.venv-lmeval" "import lm_eval" "lm-eval[api]==0.4.13" "datasets==5.2.0"
echo "$root/.venv-lmeval/bin/lm-eval"
