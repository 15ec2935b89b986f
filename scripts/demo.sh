#!/usr/bin/env bash
# The main job: sets up, builds, fetches the default model, starts the local
# cluster with `tandem up` (a coordinator, a TP=2 worker group and a draft
# worker on 127.0.0.1), streams a demo chat answer through it with
# `tandem generate`, and keeps the cluster in the foreground until Ctrl-C
# (which drains and stops every process). Env: TANDEM_TP (default 2),
# TANDEM_DEMO_CHAT.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh
model="$(bash scripts/fetch-model.sh | tail -n 1)"

fifo="$(mktemp -u)"
mkfifo "$fifo"
build/bin/tandem up --model "$model" --tp "${TANDEM_TP:-2}" --port 0 \
  --http-port "${TANDEM_HTTP_PORT:-8000}" > "$fifo" &
up_pid=$!
trap 'kill -TERM "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; rm -f "$fifo"' EXIT
trap 'exit 0' INT TERM

addr=""
exec 3< "$fifo"
while IFS= read -r -t 180 line <&3; do
  echo "$line"
  case "$line" in
    "tandem up: serving on "*) addr="${line#tandem up: serving on }"; break ;;
  esac
done
if [ -z "$addr" ]; then
  echo "demo: the cluster did not come up" >&2
  exit 1
fi
http=""
if IFS= read -r -t 10 line <&3; then
  echo "$line"
  http="${line#tandem up: OpenAI-compatible HTTP on }"
fi
build/bin/tandem generate --addr "$addr" \
  --chat "${TANDEM_DEMO_CHAT:-What is the capital of France? Answer in two sentences.}" \
  --max-tokens 128 --temperature 0
echo "demo: the cluster keeps serving on $addr (tandem generate --addr $addr ...); Ctrl-C stops it"
if [ -n "$http" ]; then
  echo "demo: and on $http (curl $http/completions -d '{\"prompt\": \"Hello\", \"max_tokens\": 16}')"
fi
cat <&3 >/dev/null &
wait "$up_pid"
