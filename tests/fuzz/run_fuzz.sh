#!/usr/bin/env bash
# Builds gguf_fuzz with clang++-14 (libFuzzer + ASan + UBSan; the main build
# uses g++) and fuzzes GgufFile for SECONDS seconds (default 60). Exits
# non-zero when the fuzzer finds a crash, leak, hang or sanitizer report; the
# reproducer is left in $OUT/artifacts/.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]
#
# Output goes to $TANDEM_FUZZ_DIR (default <repo>/build/fuzz). The build is
# skipped when the binary is newer than every source it is made from.
set -euo pipefail

SECONDS_TO_RUN="${1:-60}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${TANDEM_FUZZ_DIR:-$REPO/build/fuzz}"
CXX="${TANDEM_FUZZ_CXX:-clang++-14}"

mkdir -p "$OUT/corpus" "$OUT/seeds" "$OUT/artifacts"
ABSL_LIBS="$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format \
  absl_flat_hash_map)"
LIB_SOURCES=("$REPO"/engine/gguf/*.cc "$REPO/kernels/ggml_type.cc" "$REPO/common/logging.cc")
COMMON_FLAGS=(-std=c++20 -g -O1 -I"$REPO")
SANITIZE=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)

stale() {  # stale BINARY: true when BINARY is missing or older than a source
  [[ ! -x "$1" ]] && return 0
  [[ -n "$(find "$REPO/engine/gguf" "$REPO/kernels" "$REPO/common" "$REPO/tests/fuzz" -newer "$1" \
      \( -name '*.cc' -o -name '*.h' \) -print -quit)" ]]
}

if stale "$OUT/gguf_fuzz"; then
  echo "building $OUT/gguf_fuzz with $CXX"
  "$CXX" "${COMMON_FLAGS[@]}" "${SANITIZE[@]}" "${LIB_SOURCES[@]}" \
    "$REPO/tests/fuzz/gguf_fuzz.cc" -o "$OUT/gguf_fuzz" $ABSL_LIBS
fi
if stale "$OUT/gguf_fuzz_seeds"; then
  echo "building $OUT/gguf_fuzz_seeds with $CXX"
  "$CXX" "${COMMON_FLAGS[@]}" "${LIB_SOURCES[@]}" "$REPO/tests/fuzz/gguf_fuzz_seeds.cc" \
    -o "$OUT/gguf_fuzz_seeds" $ABSL_LIBS
fi

"$OUT/gguf_fuzz_seeds" "$OUT/seeds"
cp "$REPO/tests/reference/gguf/quant_fixture.gguf" "$OUT/seeds/"

# New inputs go to corpus/ (kept between runs); seeds/ is read only.
"$OUT/gguf_fuzz" \
  -max_total_time="$SECONDS_TO_RUN" \
  -rss_limit_mb=2048 \
  -max_len=65536 \
  -timeout=10 \
  -dict="$REPO/tests/fuzz/gguf.dict" \
  -artifact_prefix="$OUT/artifacts/" \
  -print_final_stats=1 \
  "$OUT/corpus" "$OUT/seeds"
echo "gguf_fuzz: no crash in ${SECONDS_TO_RUN}s"
