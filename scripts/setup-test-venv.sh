#!/usr/bin/env bash
# Creates .venv-test/ in the repository root: the Python the integration tests
# run in (tests/integration/), with grpcio, grpcio-tools (the stubs of proto/
# are generated with its protoc at test time), grpcio-health-checking
# (grpc.health.v1) and protobuf, the `openai` SDK (the HTTP API's tests) and
# prometheus-client (its /metrics parser), NVIDIA's cuobjdump and nvdisasm
# (the SASS gates, scripts/sass_gates.py), pinned, from PyPI; then tandem's own
# Python SDK, tandem-client, from the working tree (client/python, stubs from
# proto/), through which the tests speak the coordinator's public API.
# Idempotent (scripts/pinned_venv.sh): pip runs only when the venv is missing
# or broken or the pins changed since it last ran; the SDK is reinstalled only
# when its sources, proto/ or the pins changed (a hash in the venv).
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
  nvidia-cuda-cuobjdump==13.5.37
  nvidia-cuda-nvdisasm==13.5.37
)
source "$root/scripts/pinned_venv.sh"
pinned_venv "$venv" "" "${pins[@]}"

# What tandem-client is built from (not its tests), and the pins it builds with.
sdk_sources_hash() {
  (cd "$root" && find client/python/setup.py client/python/pyproject.toml \
    client/python/README.md client/python/src proto "$venv/pins.txt" -type f \
    -not -path '*/__pycache__/*' -not -path '*.egg-info/*' -print0 | sort -z |
    xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# pip install ./client/python, built from a copy so that no build/ or
# *.egg-info of the source tree (or of a concurrent build there) leaks in; the
# pinned grpcio-tools and setuptools of the venv build it, nothing is fetched.
install_sdk() {
  local stamp="$venv/tandem-client.sha256" want
  want="$(sdk_sources_hash)"
  _sdk_ready() {
    [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
      "$venv/bin/python" -c "import tandem_client.v1.inference_pb2_grpc" 2>/dev/null
  }
  _sdk_ready && return 0
  (
    flock 9
    if ! _sdk_ready; then
      local copy
      copy="$(mktemp -d)"
      trap 'rm -rf "$copy"' EXIT
      tar -C "$root/client/python" --exclude='*.egg-info' --exclude=__pycache__ -cf - \
        setup.py pyproject.toml README.md src | tar -C "$copy" -xf -
      TANDEM_PROTO_DIR="$root/proto" "$venv/bin/pip" install --quiet \
        --disable-pip-version-check --no-index --no-deps --no-build-isolation \
        --no-cache-dir "$copy" >&2
      "$venv/bin/python" -c "import tandem_client.v1.inference_pb2_grpc"
      printf '%s\n' "$want" >"$stamp"
    fi
  ) 9<"${BASH_SOURCE[0]}"
}
install_sdk
echo "$venv/bin/python"
