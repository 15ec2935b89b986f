#!/usr/bin/env bash
# Runs tandem's CUDA checks on a machine with an NVIDIA GPU, from a folder
# made by scripts/pack-gpu-build.sh: the kernel tests against the CPU
# references, the model runner against the CPU model, `tandem run --device
# cuda` against the CPU reference (tests/integration/cuda_run_test.py), and
# decode throughput of `tandem run` on the GPU beside the CPU of the same
# machine. Each check's log goes to OUT_DIR; a summary line per check to
# stdout. Exits 1 if any check failed.
# Usage: gpu-checks.sh MODEL.gguf OUT_DIR
# Env: GPU_PACK (the packed folder; default: this script's folder),
# SKIP_KERNEL_TESTS=1 (they ran already).
set -uo pipefail
here="${GPU_PACK:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
model="$1"
out="$2"
mkdir -p "$out"
# cuBLAS, NCCL and the driver from this machine, wherever its CUDA put them.
cublas="$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)"
nccl="$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -1)"
export TANDEM_CUDA_LIBS="$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):$(dirname "${nccl:-/usr/local/cuda/lib64/x}"):/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu"
export TANDEM_MODEL="$model"
failed=0
check() {  # check NAME TIMEOUT_S COMMAND...
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ $rc -eq 0 ] || { failed=1; tail -25 "$out/$name.log"; }
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "cuBLAS: ${cublas:-not found}; NCCL: ${nccl:-not found}"
if [ "${SKIP_KERNEL_TESTS:-0}" != 1 ]; then
  check kernel_tests 240 "$here/bin/cuda_gpu_kernel_tests" --gtest_filter='-*EnvironmentOrder*' \
    --gtest_output="xml:$out/kernel_tests.xml"
fi
for w in native bf16; do
  check "runner_check_$w" 60 "$here/bin/tandem_cuda_runner_check" "$model" "$w"
done
check model_runner_test 300 "$here/bin/cuda_gpu_model_runner_test" \
  --gtest_output="xml:$out/model_runner_test.xml"
TANDEM_BIN="$here/bin/tandem" TANDEM_CUDA_RUNTIME=gpu check cuda_run_test 300 \
  python3 "$here/cuda_run_test.py" -v
# Throughput: 64 requests of 128 greedy tokens; then one stream of 256.
python3 - "$out/requests.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(64):
        f.write(json.dumps({"prompt": f"Story {i}: once upon a time", "max_tokens": 128,
                            "temperature": 0, "ignore_eos": True}) + "\n")
PY
for dev in "cuda --cuda-weights bf16" "cuda --cuda-weights native" "cpu"; do
  tag="$(echo "$dev" | tr -d ' -' )"
  check "batch64_$tag" 300 "$here/bin/tandem" run --model "$model" --device $dev \
    --requests "$out/requests.jsonl"
  grep "tokens/s" "$out/batch64_$tag.log"
  check "single_$tag" 120 "$here/bin/tandem" run --model "$model" --device $dev \
    --prompt "Once upon a time" --max-tokens 256 --temperature 0 --ignore-eos
  grep "tokens/s" "$out/single_$tag.log"
done
exit $failed
