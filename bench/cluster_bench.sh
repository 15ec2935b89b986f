#!/usr/bin/env bash
# Measures the cluster on this machine against the single-process path, with
# fixed prompts (128-token random-id prompts, 64 output tokens each, greedy,
# EOS ignored so every request costs the same):
#   - aggregate output tokens/s at 1, 8, 32 and 128 concurrent streams
#     through `tandem up` (TP=1 and TP=2), sent by `tandem bench`;
#   - the same prompts through `tandem run --requests` (single process), once
#     with --max-seqs C (at most C sequences in a step, like C streams) and
#     once with all of them at once;
#   - the coordinator<->worker overhead per step (RPC + serialization +
#     scheduling) as a share of step time, from `tandem bench`'s step_overhead
#     (the coordinator's worker-group counters; n/a when it reports none);
#   - time to first token with and without a 112-token shared prefix (random
#     prompts of 128 tokens, 8 output tokens) at 1 and 32 streams.
# Every level of every repetition has its own prompts, so none hits prefixes
# an earlier one left in the cluster's prefix cache. KV caches are sized
# (KV_BYTES) so that 128 streams of 192 tokens fit without preemption.
#
# The client, coordinator and workers share the machine's cores, and so does
# anything else running: each measurement is repeated REPEATS times (all paths
# in every repetition, close in time) and the summary shows the best
# repetition and the worst beside it, each with the share of the machine's CPU
# that other processes took while it ran (bench/measure.py; in
# OUT_DIR/manifest.jsonl with the load average before each measurement).
#
# Builds nothing: needs tandem, tandem-coordinator and tandem-worker in
# BIN_DIR (default build/bin; scripts/build.sh) and, for TP=2, mpirun. Threads
# per worker rank: nproc/TP.
#
# Usage: bench/cluster_bench.sh [MODEL]
# Env: TPS ("1 2"), LEVELS ("1 8 32 128"), TTFT_LEVELS ("1 32"), REPEATS (2),
#      BIN_DIR (build/bin), OUT_DIR (build/cluster-bench), KV_BYTES (1073741824).
# Writes OUT_DIR/summary.json and OUT_DIR/summary.md (printed at the end;
# bench/cluster_bench_summary.py), beside every tandem bench report and
# tandem run log.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="${BIN_DIR:-$root/build/bin}"
for b in tandem tandem-coordinator tandem-worker; do
  if [ ! -x "$bin/$b" ]; then
    echo "cluster_bench: $bin/$b is missing; build first (scripts/build.sh) or set BIN_DIR" >&2
    exit 1
  fi
done
model="${1:-$(bash scripts/fetch-model.sh | tail -n 1)}"
tps="${TPS:-1 2}"
levels="${LEVELS:-1 8 32 128}"
ttft_levels="${TTFT_LEVELS:-1 32}"
repeats="${REPEATS:-2}"
out="${OUT_DIR:-$root/build/cluster-bench}"
kv_bytes="${KV_BYTES:-1073741824}"
input_len=128
output_len=64
ttft_output_len=8
shared_prefix_len=112  # 7 KV blocks of 16 tokens
startup_timeout_s=180
step_timeout_s=1200    # one tandem bench or tandem run
cores="$(nproc)"
# The tree the binaries are assumed built from, read before anything runs.
git_rev="$(git describe --always --dirty 2>/dev/null || echo unknown)"
mkdir -p "$out/bin"
rm -f "$out"/*.json "$out"/*.jsonl "$out"/*.txt "$out"/*.err "$out"/summary.md
# A snapshot of the binaries: a rebuild during the run changes nothing (tandem
# up finds tandem-coordinator and tandem-worker beside itself).
for b in tandem tandem-coordinator tandem-worker; do cp "$bin/$b" "$out/bin/$b.tmp"; done
for b in tandem tandem-coordinator tandem-worker; do mv -f "$out/bin/$b.tmp" "$out/bin/$b"; done
bin="$out/bin"

# Requests per level: two rounds of C streams, at least 8, so that every
# level runs for seconds, not milliseconds.
num_requests() { local c=$1; echo $(( 2 * c > 8 ? 2 * c : 8 )); }

# One JSONL prompt file per level and repetition, all prompts distinct.
for r in $(seq 1 "$repeats"); do
  for c in $levels; do
    python3 - "$out/prompts_r${r}_c$c.jsonl" "$(num_requests "$c")" $(( 1000 * r + c )) \
      "$input_len" "$output_len" <<'PY'
import json, random, sys
path, n, seed, input_len, output_len = sys.argv[1], *map(int, sys.argv[2:])
rng = random.Random(seed)
with open(path, "w") as f:
    for _ in range(n):
        # Ids in [100, 32000): past the special tokens, inside every
        # vocabulary tandem serves (Llama 2's 32000 is the smallest).
        ids = [rng.randrange(100, 32000) for _ in range(input_len)]
        f.write(json.dumps({"prompt_token_ids": ids, "max_tokens": output_len,
                            "temperature": 0, "ignore_eos": True}) + "\n")
PY
  done
done

up_pid=""
# Stops the cluster: SIGTERM drains it (coordinator, then workers); whatever
# is left of its session after the grace period is killed.
stop_cluster() {
  [ -n "$up_pid" ] || return 0
  kill -TERM "$up_pid" 2>/dev/null || true
  for _ in $(seq 1 90); do
    kill -0 "$up_pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$up_pid" 2>/dev/null; then
    echo "cluster_bench: tandem up (pid $up_pid) did not stop within 45 s: killing its session" >&2
    pkill -KILL -s "$up_pid" 2>/dev/null || true
  fi
  wait "$up_pid" 2>/dev/null || true
  up_pid=""
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# Starts `tandem up --tp $1` in a session of its own (log $2) and sets addr
# from its "serving on" line (bounded wait).
start_cluster() {
  local tp=$1 log=$2 threads=$(( cores / $1 > 0 ? cores / $1 : 1 ))
  local no_draft=() http_port=() help
  # --no-draft exists once tandem up starts a draft worker; older builds start
  # none. --http-port (default 8000) exists once the coordinator serves HTTP.
  help="$("$bin/tandem" --helpfull 2>&1 || true)"
  if [[ "$help" == *"--no-draft"* || "$help" == *"--no_draft"* ]]; then no_draft=(--no-draft); fi
  if [[ "$help" == *"--http-port"* || "$help" == *"--http_port"* ]]; then http_port=(--http-port 0); fi
  : > "$log"  # exists before the child opens it, for the polling below
  setsid "$bin/tandem" up --model "$model" --tp "$tp" --port 0 "${http_port[@]}" "${no_draft[@]}" \
    --worker-arg="--threads=$threads,--kv-cache-bytes=$kv_bytes" > "$log" 2>&1 &
  up_pid=$!
  addr=""
  local deadline=$(( SECONDS + startup_timeout_s ))
  while [ $SECONDS -lt $deadline ]; do
    addr="$(sed -n 's/^tandem up: serving on //p' "$log" | head -n 1 || true)"
    [ -n "$addr" ] && return 0
    if ! kill -0 "$up_pid" 2>/dev/null; then
      echo "cluster_bench: tandem up --tp $tp exited: $(tail -n 20 "$log")" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "cluster_bench: tandem up --tp $tp not serving within ${startup_timeout_s} s:" \
    "$(tail -n 20 "$log")" >&2
  exit 1
}

# One measurement (bench/measure.py records it in the manifest with the CPU
# share other processes took meanwhile). bench LABEL FIELDS... -- FLAGS...
bench() {
  local label=$1 fields=()
  shift
  while [ "$1" != "--" ]; do fields+=("$1"); shift; done
  shift
  echo "== $label" >&2
  python3 bench/measure.py "$out/manifest.jsonl" --session "$up_pid" label="$label" \
    "${fields[@]}" -- timeout "$step_timeout_s" "$bin/tandem" bench --addr "$addr" \
    --out "$out/$label.json" "$@" > "$out/$label.txt"
}

# run LABEL PROMPTS MAX_SEQS FIELDS...
run() {
  local label=$1 prompts=$2 seqs=$3
  shift 3
  echo "== $label" >&2
  python3 bench/measure.py "$out/manifest.jsonl" label="$label" "$@" -- \
    timeout "$step_timeout_s" "$bin/tandem" run --model "$model" --requests "$prompts" --json \
    --kv-cache-bytes "$kv_bytes" --max-seqs "$seqs" > /dev/null 2> "$out/$label.err"
}

for r in $(seq 1 "$repeats"); do
  for tp in $tps; do
    start_cluster "$tp" "$out/r${r}_up_tp$tp.txt"
    echo "== repetition $r: tandem up --tp $tp serving on $addr" >&2
    for c in $levels; do
      n="$(num_requests "$c")"
      bench "r${r}_up_tp${tp}_c$c" kind=bench path="up TP=$tp" rep="$r" streams="$c" \
        requests="$n" -- --concurrency "$c" --num-requests "$n" \
        --dataset "$out/prompts_r${r}_c$c.jsonl"
    done
    for c in $ttft_levels; do
      n="$(num_requests "$c")"
      for prefix in 0 "$shared_prefix_len"; do
        bench "r${r}_ttft_tp${tp}_c${c}_prefix$prefix" kind=ttft path="up TP=$tp" rep="$r" \
          streams="$c" requests="$n" shared_prefix_len="$prefix" -- --concurrency "$c" \
          --num-requests "$n" --input-len "$input_len" --output-len "$ttft_output_len" \
          --shared-prefix-len "$prefix" --seed $(( 1000 * r + 7 * c + prefix ))
      done
    done
    stop_cluster
  done
  for c in $levels; do
    n="$(num_requests "$c")"
    prompts="$out/prompts_r${r}_c$c.jsonl"
    run "r${r}_run_c${c}_seqs$c" "$prompts" "$c" kind=run path="run --max-seqs C" rep="$r" \
      streams="$c" requests="$n"
    run "r${r}_run_c${c}_seqs$n" "$prompts" "$n" kind=run path="run all at once" rep="$r" \
      streams="$c" requests="$n"
  done
done

python3 bench/cluster_bench_summary.py "$out" "$model" "$cores" "$shared_prefix_len" "$git_rev"
