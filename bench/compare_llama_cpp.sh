#!/usr/bin/env bash
# Measures tandem's engine beside llama.cpp on the same GGUF in one run:
# prefill tokens/s (512-token prompt), single-stream decode tokens/s, and
# aggregate decode tokens/s with 16 and 64 sequences in one batch — once per
# SIMD level this CPU has (avx2; avx512 too where it has AVX-512 VNNI), each
# with tandem's kernels held to that level (TANDEM_ISA) and llama.cpp built
# for it (bench/build_llama_cpp.sh ISA, GGML_NATIVE=OFF), and the ratios
# printed per level.
#
# TYPES names weight types to compare besides the model's own: each is made
# from MODEL once with llama-quantize --allow-requantize (build/models/), and
# both engines read the same file.
#
# llama.cpp is built from PyPI's llama-cpp-python sdist, into
# build/llama.cpp/build-ISA/, once per level. Nothing of it is committed.
# Usage: bench/compare_llama_cpp.sh [MODEL]
# Env: THREADS (default nproc), ISAS (default: every level the CPU has),
#      TYPES (e.g. "q4_0 q8_0"; default none).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
model="${1:-$(bash scripts/fetch-model.sh | tail -n 1)}"
threads="${THREADS:-$(nproc)}"
if [ -z "${ISAS:-}" ]; then
  ISAS=avx2
  if grep -q avx512_vnni /proc/cpuinfo && grep -q avx512bw /proc/cpuinfo; then ISAS="avx2 avx512"; fi
fi

compare() {  # compare ISA MODEL: one tandem and one llama.cpp measurement, their ratios
  local isa="$1" model="$2" lc_bin ours
  lc_bin="$(bash "$root/bench/build_llama_cpp.sh" "$isa")"
  echo "== $isa, $(basename "$model"): tandem (TANDEM_ISA=$isa, threads=$threads)"
  ours="$(TANDEM_ISA="$isa" build/bin/tandem-engine-bench --model "$model" --threads "$threads" \
    --prefill_len 512 --prompt_len 128 --decode_len 128 --batch_sizes 1,16,64)"
  echo "$ours"
  echo "== $isa: llama.cpp llama-bench (pp512, tg128)"
  "$lc_bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -r 3 -o json > build/llama-bench.json
  echo "== $isa: llama.cpp llama-batched-bench (npp 128, ntg 128, npl 1,16,64)"
  "$lc_bin/llama-batched-bench" -m "$model" -t "$threads" -c 20000 -b 2048 -ub 512 \
    -npp 128 -ntg 128 -npl 1,16,64 --output-format jsonl 2>/dev/null | grep '^{' > build/llama-batched-bench.jsonl
  ratios "$isa $(basename "$model")" "$ours"
}

ratios() {  # ratios ISA TANDEM_JSON
python3 - "$1" "$2" <<'PY'
import json, sys
isa, ours = sys.argv[1], json.loads(sys.argv[2])
lb = json.load(open("build/llama-bench.json"))
pp = next(r["avg_ts"] for r in lb if r["n_prompt"] == 512 and r["n_gen"] == 0)
tg = next(r["avg_ts"] for r in lb if r["n_gen"] == 128 and r["n_prompt"] == 0)
bb = {r["pl"]: r["speed_tg"] for r in map(json.loads, open("build/llama-batched-bench.jsonl"))}
our_dec = {d["batch"]: d["tokens_per_s"] for d in ours["decode"]}
rows = [("prefill 512 tok/s", ours["prefill"]["tokens_per_s"], pp),
        ("decode 1 stream tok/s (llama-bench tg128)", our_dec[1], tg)]
for b in (1, 16, 64):
    rows.append((f"decode {b} seqs aggregate tok/s (batched-bench)", our_dec[b], bb.get(b, float("nan"))))
print(f"{'metric (' + isa + '; tandem ran ' + ours.get('isa', '?') + ')':50s} {'tandem':>10s} {'llama.cpp':>10s} {'ratio':>7s}")
for name, a, b in rows:
    print(f"{name:50s} {a:10.1f} {b:10.1f} {a / b:7.2f}")
print(f"tandem 64-seq aggregate / tandem single stream: {our_dec[64] / our_dec[1]:.2f}x")
PY
}

models=("$model")
for type in ${TYPES:-}; do
  out="build/models/$(basename "$model" .gguf).requant-$type.gguf"
  if [ ! -f "$out" ]; then
    mkdir -p build/models
    "$(bash "$root/bench/build_llama_cpp.sh" "${ISAS%% *}")/llama-quantize" --allow-requantize "$model" "$out" \
      "${type^^}" >/dev/null 2>&1
  fi
  models+=("$out")
done
for isa in $ISAS; do
  for m in "${models[@]}"; do compare "$isa" "$m"; done
done
