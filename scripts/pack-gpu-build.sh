#!/usr/bin/env bash
# Builds the real-GPU variant of tandem (-DTANDEM_CUDA_RUNTIME=gpu, nvcc for
# sm_80/sm_90) into build-gpu/ and packs what scripts/gpu-checks.sh and
# bench/gpu_bench/run.sh (gpu_bench/ in the pack) run into
# one self-contained folder for a GPU machine that has the CUDA driver,
# cuBLAS and NCCL but none of tandem's other libraries: stripped binaries, every
# shared library they load except the CUDA driver and cuBLAS (glibc and its
# loader included, so the host's glibc version does not matter), the tests'
# scripts and the model. Needs nvcc here; no GPU.
# Usage: scripts/pack-gpu-build.sh [OUT_DIR]   (default: gpu-pack/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/gpu-pack}"
cd "$root"
targets=(tandem tandem_cuda_runner_check cuda_gpu_kernel_tests cuda_gpu_model_runner_test
         tandem-gpu-bench tandem-worker tandem-coordinator)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_CUDA_RUNTIME=gpu \
  "${launcher[@]}" >/dev/null
cmake --build build-gpu -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/libexec" "$out/lib" "$out/bin"
for t in "${targets[@]}"; do
  src="$(find build-gpu -type f -name "$t" -perm -u+x | head -1)"
  [ -n "$src" ] || { echo "pack-gpu-build: $t was not built" >&2; exit 1; }
  strip -o "$out/libexec/$t" "$src"
  # Each program runs through the packed loader and libraries.
  cat > "$out/bin/$t" <<WRAP
#!/bin/sh
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$here/lib:\${TANDEM_CUDA_LIBS:-}" "\$here/libexec/$t" "\$@"
WRAP
  chmod +x "$out/bin/$t"
done
# Shared libraries, resolved here; the driver (libcuda), cuBLAS and NCCL
# (200+ MB) come from the GPU machine (TANDEM_CUDA_LIBS), matching its driver.
ldd "$out"/libexec/* | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u |
  grep -v -e libcuda -e libcublas -e libnccl | while read -r lib; do
    cp -L "$lib" "$out/lib/"
  done
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true
cp scripts/gpu-checks.sh tests/integration/cuda_run_test.py "$out/"
# bench/gpu_bench/run.sh runs from the pack: TANDEM_BIN_DIR=PACK/bin.
mkdir -p "$out/gpu_bench"
cp bench/gpu_bench/*.sh bench/gpu_bench/*.py "$out/gpu_bench/"
echo "pack-gpu-build: $(du -sh "$out" | cut -f1) in $out"
