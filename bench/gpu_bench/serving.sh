#!/usr/bin/env bash
# The serving benchmark of bench/gpu_bench/run.sh: tandem-worker on the GPU
# (mpirun -np $SERVING_TP when > 1), tandem-coordinator in front, `tandem
# bench` over gRPC, every process on 127.0.0.1 with OS-chosen ports; every
# wait bounded; everything it started is stopped on exit.
# Usage: bench/gpu_bench/serving.sh MODEL OUT.json   (env: as run.sh's)
set -euo pipefail
model="$1"
report="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TANDEM_BIN_DIR:-$root/build/bin}"
tp="${SERVING_TP:-1}"
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do timeout 30 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# The address NAME prints on its first stdout line in FILE, within 600 s (a
# big model loads for a while).
address() {
  for _ in $(seq 1200); do
    if line="$(head -n 1 "$2" 2>/dev/null)" && [ -n "$line" ]; then
      echo "${line##* }"
      return 0
    fi
    sleep 0.5
  done
  echo "serving.sh: $1 printed no address within 600 s; its log:" >&2
  tail -20 "$tmp/$1.err" >&2
  return 1
}
worker=("$bin/tandem-worker" --model "$model" --host 127.0.0.1 --port 0 --device cuda ${WORKER_ARGS:-})
if [ "$tp" -gt 1 ]; then
  worker=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$tp" "${worker[@]}")
fi
"${worker[@]}" >"$tmp/worker.out" 2>"$tmp/worker.err" &
pids+=($!)
waddr="$(address worker "$tmp/worker.out")"
"$bin/tandem-coordinator" --worker "$waddr" --model "$model" --host 127.0.0.1 --port 0 \
  --http-port -1 --connect-timeout-s 600 >"$tmp/coordinator.out" 2>"$tmp/coordinator.err" &
pids+=($!)
caddr="$(address coordinator "$tmp/coordinator.out")"
"$bin/tandem" bench --addr "$caddr" --concurrency "${SERVING_CONCURRENCY:-64}" \
  --num-requests "${SERVING_REQUESTS:-256}" --input-len "${INPUT_LEN:-512}" \
  --output-len "${OUTPUT_LEN:-256}" --out "$report" >&2
