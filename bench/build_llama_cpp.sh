#!/usr/bin/env bash
# Builds llama.cpp from the source that PyPI's llama-cpp-python sdist carries
# (vendor/llama.cpp) into build/llama.cpp/build-ISA/bin/: llama-bench,
# llama-batched-bench, llama-server and llama-quantize, once (each target only
# when missing).
# Nothing of it is committed; the benchmarks that measure tandem beside
# llama.cpp call this. Prints the bin folder.
#
# ISA: native (default: GGML_NATIVE=ON, whatever this CPU has), avx2 (AVX2 +
# FMA + F16C, no AVX-512, GGML_NATIVE=OFF) or avx512 (avx2 plus AVX-512
# F/BW/VL/VNNI), so that tandem's kernels at one ISA (TANDEM_ISA) are measured
# beside llama.cpp built for the same one.
# Usage: bench/build_llama_cpp.sh [native|avx2|avx512]   Env: THREADS (default nproc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lc="$root/build/llama.cpp"
isa="${1:-native}"
threads="${THREADS:-$(nproc)}"
case "$isa" in
  native) isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_AVX512=OFF) ;;
  avx512) isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                     -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON) ;;
  *) echo "build_llama_cpp.sh: ISA '$isa': expected native, avx2 or avx512" >&2; exit 2 ;;
esac
out="$lc/build-$isa"
targets=(llama-bench llama-batched-bench llama-server llama-quantize)
missing=()
for t in "${targets[@]}"; do [ -x "$out/bin/$t" ] || missing+=("$t"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ ! -d "$lc/src" ]; then
    mkdir -p "$lc"
    tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" llama-cpp-python==0.3.36 >&2
    tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
    mv "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp" "$lc/src"
    rm -rf "$tmp"
  fi
  cmake -S "$lc/src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
  cmake --build "$out" -j "$threads" --target "${missing[@]}" >&2
fi
echo "$out/bin"
