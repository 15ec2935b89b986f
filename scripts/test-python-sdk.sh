#!/usr/bin/env bash
# Installs the Python SDK (client/python) into a fresh venv, .venv-sdk/ (as a
# user would: `pip install ./client/python[test]`, from PyPI), then runs its
# pytest suite against a real cluster started by `tandem up` (worker group,
# draft worker, coordinator; some tests start a coordinator of their own).
# Usage: scripts/test-python-sdk.sh
# Env: TANDEM_BIN (default build/bin/tandem), TANDEM_COORDINATOR_BIN (default
# build/bin/tandem-coordinator), TANDEM_MODEL (default: the fetched default model).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-sdk"
export TANDEM_BIN="${TANDEM_BIN:-$root/build/bin/tandem}"
export TANDEM_COORDINATOR_BIN="${TANDEM_COORDINATOR_BIN:-$root/build/bin/tandem-coordinator}"
export TANDEM_MODEL="${TANDEM_MODEL:-$(bash "$root/scripts/fetch-model.sh" | tail -n 1)}"
(
  flock 9
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$root/client/python[test]"
) 9<"${BASH_SOURCE[0]}"
# The installed package, not the source tree, is what the tests import.
cd "$root/client/python/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider .
