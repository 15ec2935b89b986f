#!/usr/bin/env bash
# Beam search throughput vs plain sampling of n = num_beams, same prompts,
# same single process (`tandem run --requests`): beams x tokens per second.
# Every request generates exactly --max-tokens tokens per beam / sample
# (ignore_eos), so the two runs do the same number of decode positions.
#   bash bench/beam_bench.sh [--beams 4] [--requests 8] [--max-tokens 64]
# Needs build/bin/tandem (scripts/build.sh) and the model (scripts/fetch-model.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/build/bin/tandem"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
beams=4 requests=8 max_tokens=64
while [ $# -gt 0 ]; do
  case "$1" in
    --beams) beams="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    *) echo "beam_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
topics=("the sea" "a city at night" "learning to code" "the history of bread" "mountains"
        "a robot's first day" "winter mornings" "the moon landing" "a small garden" "jazz")
for ((i = 0; i < requests; ++i)); do
  topic="${topics[$((i % ${#topics[@]}))]}"
  printf '{"messages": [{"role": "user", "content": "Write a short story about %s (%d)."}], "max_tokens": %d, "ignore_eos": true, %s}\n' \
    "$topic" "$i" "$max_tokens" "\"num_beams\": $beams" >> "$tmp/beam.jsonl"
  printf '{"messages": [{"role": "user", "content": "Write a short story about %s (%d)."}], "max_tokens": %d, "ignore_eos": true, "n": %d, "temperature": 1.0, "seed": %d}\n' \
    "$topic" "$i" "$max_tokens" "$beams" "$i" >> "$tmp/sample.jsonl"
done
run() {  # $1 = requests file; prints tokens/s from tandem run's stderr summary
  "$bin" run --model "$model" --requests "$1" > /dev/null 2> "$tmp/err"
  grep -o '[0-9.]* tokens/s' "$tmp/err" | head -1 | cut -d' ' -f1
}
beam_tps="$(run "$tmp/beam.jsonl")"
sample_tps="$(run "$tmp/sample.jsonl")"
echo "beam search: $requests requests x $beams beams x $max_tokens tokens: $beam_tps tokens/s"
echo "sampling n=$beams: $requests requests x $beams samples x $max_tokens tokens: $sample_tps tokens/s"
python3 -c "print(f'beam / sampling: {float(\"$beam_tps\") / float(\"$sample_tps\"):.2f}x')"
