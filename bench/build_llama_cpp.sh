#!/usr/bin/env bash
# Builds llama.cpp from the source that PyPI's llama-cpp-python sdist carries
# (vendor/llama.cpp) into build/llama.cpp/build/bin/: llama-bench,
# llama-batched-bench and llama-server, once (each target only when missing).
# Nothing of it is committed; the benchmarks that measure tandem beside
# llama.cpp call this. Prints the bin folder.
# Usage: bench/build_llama_cpp.sh   Env: THREADS (default nproc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lc="$root/build/llama.cpp"
threads="${THREADS:-$(nproc)}"
targets=(llama-bench llama-batched-bench llama-server)
missing=()
for t in "${targets[@]}"; do [ -x "$lc/build/bin/$t" ] || missing+=("$t"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ ! -d "$lc/src" ]; then
    mkdir -p "$lc"
    tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" llama-cpp-python==0.3.36 >&2
    tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
    mv "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp" "$lc/src"
    rm -rf "$tmp"
  fi
  cmake -S "$lc/src" -B "$lc/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
  cmake --build "$lc/build" -j "$threads" --target "${missing[@]}" >&2
fi
echo "$lc/build/bin"
