#!/usr/bin/env bash
# The multi-GPU benchmark, end to end, into OUT_DIR:
#   1. the model: `tandem make-model --shape $SHAPE --dtype bf16` (random
#      weights of the real shape; kept in OUT_DIR and reused);
#   2. tandem.json: tandem-gpu-bench — single-stream decode tokens/s against
#      the HBM roofline (device-to-device copy bandwidth measured in the same
#      run) and output tokens/s at $NUM_SEQS sequences of $INPUT_LEN in /
#      $OUTPUT_LEN out, for each tensor-parallel size in $TP the GPUs allow;
#   3. baseline.json: the same shapes through PyTorch + transformers
#      `generate` (hf_baseline.py in $PYTHON; recorded as skipped without
#      torch + CUDA);
#   4. serving.json: `tandem bench` (gRPC, $SERVING_CONCURRENCY in flight)
#      against tandem-worker --device cuda (mpirun -np $SERVING_TP when > 1)
#      behind tandem-coordinator, all on 127.0.0.1;
#   5. gpu_bench.png and a Markdown table (plot_gpu_bench.py in $PLOT_PYTHON).
# On a build against the emulator (the default) it runs on the CPU: CI runs
# it with SHAPE=tiny and tiny sizes to prove every step works.
# Usage: bench/gpu_bench/run.sh OUT_DIR
# Env (defaults): SHAPE (llama3-8b), TP (1,2,4,8), NUM_SEQS (1,16,64,256),
#   INPUT_LEN (512), OUTPUT_LEN (256), MODEL (OUT_DIR/SHAPE-bf16.gguf),
#   TANDEM_BIN_DIR (build/bin), PYTHON (python3), PLOT_PYTHON (a python with
#   matplotlib; default: .venv-bench from scripts/setup-bench-venv.sh),
#   SERVING_TP (1), SERVING_CONCURRENCY (64), SERVING_REQUESTS (256),
#   GPU_BENCH_ARGS, WORKER_ARGS (extra flags).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: bench/gpu_bench/run.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="${TANDEM_BIN_DIR:-$root/build/bin}"
shape="${SHAPE:-llama3-8b}"
num_seqs="${NUM_SEQS:-1,16,64,256}"
input_len="${INPUT_LEN:-512}"
output_len="${OUTPUT_LEN:-256}"
model="${MODEL:-$out/$shape-bf16.gguf}"
log() { echo "gpu_bench: $*" >&2; }

if [ ! -f "$model" ]; then
  log "making $model"
  "$bin/tandem" make-model --shape "$shape" --dtype bf16 --out "$model" >&2
fi
log "tandem-gpu-bench"
# shellcheck disable=SC2086  # GPU_BENCH_ARGS is a list of flags
"$bin/tandem-gpu-bench" --model "$model" --tp "${TP:-1,2,4,8}" --num-seqs "$num_seqs" \
  --input-len "$input_len" --output-len "$output_len" ${GPU_BENCH_ARGS:-} --out "$out/tandem.json"
log "transformers baseline"
"${PYTHON:-python3}" "$here/hf_baseline.py" --shape "$shape" --num-seqs "$num_seqs" \
  --input-len "$input_len" --output-len "$output_len" --out "$out/baseline.json" ||
  log "the baseline failed (exit $?); the report goes on without it"
log "serving benchmark"
bash "$here/serving.sh" "$model" "$out/serving.json"
log "plot"
plot_python="${PLOT_PYTHON:-}"
if [ -z "$plot_python" ]; then
  plot_python="$(bash "$root/scripts/setup-bench-venv.sh" | tail -n 1)"
fi
"$plot_python" "$here/plot_gpu_bench.py" "$out/tandem.json" --baseline "$out/baseline.json" \
  --out "$out/gpu_bench.png"
