#!/usr/bin/env bash
# Creates tests/reference/.venv with the Python tooling that regenerates the
# committed expected outputs under tests/reference/ (from PyPI):
# llama-cpp-python (builds llama.cpp from source; several minutes on 2 cores),
# gguf and numpy; and tests/reference/.venv-hf with torch, transformers and
# accelerate for the beam-search reference (transformers' GGUF loader needs
# gguf < 0.11 and numpy < 2, so it gets its own venv).
# Not needed to build or test tandem: the outputs are committed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/tests/reference/.venv"
bash "$root/scripts/setup-deps.sh"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$venv/bin/pip" install --quiet llama-cpp-python==0.3.36 gguf==0.19.0 numpy
hf_venv="$root/tests/reference/.venv-hf"
[ -x "$hf_venv/bin/python" ] || python3 -m venv "$hf_venv"
"$hf_venv/bin/pip" install --quiet torch==2.5.1 transformers==4.46.3 accelerate==1.1.1 \
  gguf==0.10.0 "numpy<2" sentencepiece
echo "$venv"
echo "$hf_venv"
