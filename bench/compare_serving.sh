#!/usr/bin/env bash
# Serving throughput and latency of one tandem coordinator (--local) through
# its three doors — gRPC (`tandem bench`), OpenAI HTTP (`tandem bench
# --backend openai`) and in-process (`tandem run --requests`) — at 1, 64 and
# 256 concurrent streams, and of llama.cpp's llama-server beside tandem's HTTP
# API at 1, 16 and 64, all with the same random-token workload, in one run.
# Writes every report to OUT (default build/serving-bench/), a table to
# stdout and OUT/serving.png (bench/plot_bench.py).
# Usage: bench/compare_serving.sh [MODEL]
# Env: THREADS (default nproc), INPUT_LEN (64), OUTPUT_LEN (64), OUT.
# All traffic stays on 127.0.0.1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
model="${1:-$(bash scripts/fetch-model.sh | tail -n 1)}"
threads="${THREADS:-$(nproc)}"
in_len="${INPUT_LEN:-64}"
out_len="${OUTPUT_LEN:-64}"
out="${OUT:-$root/build/serving-bench}"
bin="$root/build/bin"
mkdir -p "$out"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

# wait_line FILE REGEX: the first match of REGEX's group in FILE, within 120 s.
wait_line() {
  for _ in $(seq 1 1200); do
    if m="$(sed -nE "s/$2/\1/p" "$1" | head -n 1)" && [ -n "$m" ]; then echo "$m"; return; fi
    sleep 0.1
  done
  echo "compare_serving: no '$2' in $1" >&2
  exit 1
}

requests_for() { echo $(( $1 * 2 > 16 ? $1 * 2 : 16 )); }

bench() {  # bench NAME CONCURRENCY ARGS...
  local name="$1" c="$2"
  shift 2
  "$bin/tandem" bench "$@" --concurrency "$c" --num-requests "$(requests_for "$c")" \
    --input-len "$in_len" --output-len "$out_len" --seed 1 --goodput ttft:2000,tpot:200 \
    --out "$out/$name-c$c.json" >/dev/null
}

"$bin/tandem-coordinator" --local --model "$model" --threads "$threads" --port 0 --http-port 0 \
  --max-seqs 256 >"$out/coordinator.out" 2>"$out/coordinator.err" &
pids+=($!)
grpc="$(wait_line "$out/coordinator.out" '^tandem-coordinator listening on (.*)$')"
http="$(wait_line "$out/coordinator.out" '^tandem-coordinator HTTP listening on (.*)$')"
for c in 1 16 64 256; do
  bench tandem-grpc "$c" --addr "$grpc"
  bench tandem-http "$c" --backend openai --url "http://$http/v1"
done
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true

# tandem run: every request of the workload submitted at once, in-process.
for c in 1 64 256; do
  python3 - "$c" "$in_len" "$out_len" >"$out/run-c$c.jsonl" <<'PY'
import json, random, sys
c, n_in, n_out = map(int, sys.argv[1:])
rng = random.Random(1)
for _ in range(c):
    ids = [rng.randrange(100, 32000) for _ in range(n_in)]
    print(json.dumps({"prompt_token_ids": ids, "max_tokens": n_out, "temperature": 0,
                      "ignore_eos": True}))
PY
  "$bin/tandem" run --model "$model" --threads "$threads" --requests "$out/run-c$c.jsonl" \
    >/dev/null 2>"$out/run-c$c.err"
done

lc_bin="$(bash bench/build_llama_cpp.sh)"
for c in 1 16 64; do
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$lc_bin/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -np "$c" \
    -c $(( c * (in_len + out_len + 16) )) >"$out/llama-server-c$c.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.2
  done
  bench llama-server "$c" --backend openai --url "http://127.0.0.1:$port/v1"
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
done

python3 - "$out" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
def tput(name, c):
    with open(f"{out}/{name}-c{c}.json") as f:
        return json.load(f)["output_tokens_per_s"]
def run_tput(c):
    text = open(f"{out}/run-c{c}.err").read()
    return float(re.search(r"in [0-9.]+ s: ([0-9.]+) tokens/s", text).group(1))
print(f"{'streams':>8} {'gRPC tok/s':>11} {'HTTP tok/s':>11} {'HTTP/gRPC':>10} {'run tok/s':>10}")
for c in (1, 64, 256):
    g, h = tput("tandem-grpc", c), tput("tandem-http", c)
    print(f"{c:>8} {g:>11.1f} {h:>11.1f} {h / g:>10.3f} {run_tput(c):>10.1f}")
print(f"{'streams':>8} {'tandem HTTP':>12} {'llama-server':>13} {'ratio':>7}")
for c in (1, 16, 64):
    t, l = tput("tandem-http", c), tput("llama-server", c)
    print(f"{c:>8} {t:>12.1f} {l:>13.1f} {t / l:>7.2f}")
PY
python="$(bash scripts/setup-bench-venv.sh)"
args=()
for f in "$out"/tandem-grpc-c*.json; do args+=("tandem gRPC=$f"); done
for f in "$out"/tandem-http-c*.json; do args+=("tandem HTTP=$f"); done
for f in "$out"/llama-server-c*.json; do args+=("llama-server=$f"); done
"$python" bench/plot_bench.py --out "$out/serving.png" "${args[@]}"
