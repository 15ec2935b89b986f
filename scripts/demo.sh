#!/usr/bin/env bash
# The main job: sets up, builds, fetches the default model and streams a chat
# answer from it with `tandem run`. Extra arguments go to `tandem run`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh
model="$(bash scripts/fetch-model.sh | tail -n 1)"
exec build/bin/tandem run --model "$model" \
  --chat "${TANDEM_DEMO_CHAT:-What is the capital of France? Answer in two sentences.}" \
  --max-tokens 128 "$@"
