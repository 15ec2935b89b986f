#!/usr/bin/env bash
# Creates .venv-test/ in the repository root: the Python the integration tests
# run in (tests/integration/), with grpcio, grpcio-tools (the stubs of proto/
# are generated with its protoc at test time), grpcio-health-checking
# (grpc.health.v1) and protobuf, the `openai` SDK (the HTTP API's tests) and
# prometheus-client (its /metrics parser), pinned, from PyPI. Idempotent
# (scripts/pinned_venv.sh): pip runs only when the venv is missing or broken
# or the pins changed since it last ran.
# CTest runs this before the integration tests (the test_venv fixture), so
# scripts/test.sh and a plain `ctest --test-dir build` both set it up.
# Usage: scripts/setup-test-venv.sh   Prints the venv's python.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-test"
# grpcio-tools 1.85.1 writes protobuf 7.35 gencode, which needs runtime >= 7.35.
pins=(
  grpcio==1.85.1
  grpcio-tools==1.85.1
  grpcio-health-checking==1.85.1
  protobuf==7.36.2
  setuptools==84.2.1
  typing-extensions==4.16.0
  openai==3.57.0
  prometheus-client==0.26.0
)
source "$root/scripts/pinned_venv.sh"
pinned_venv "$venv" "" "${pins[@]}"
echo "$venv/bin/python"
