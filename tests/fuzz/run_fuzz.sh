#!/usr/bin/env bash
# Builds a fuzz target with clang++-14 (libFuzzer + ASan + UBSan; the main
# build uses g++) and fuzzes it for SECONDS seconds (default 60). Exits
# non-zero when the fuzzer finds a crash, leak, hang or sanitizer report; the
# reproducer is left in $OUT/artifacts/.
#
#   tests/fuzz/run_fuzz.sh [SECONDS] [TARGET]
#
# TARGET: gguf (default; GgufFile) or openai_request (the OpenAI HTTP
# request parser). Output goes to $TANDEM_FUZZ_DIR (default
# <repo>/build/fuzz/TARGET). The build is skipped when the binary is newer
# than every source it is made from.
set -euo pipefail

SECONDS_TO_RUN="${1:-60}"
TARGET="${2:-gguf}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${TANDEM_FUZZ_DIR:-$REPO/build/fuzz/$TARGET}"
CXX="${TANDEM_FUZZ_CXX:-clang++-14}"

mkdir -p "$OUT/corpus" "$OUT/seeds" "$OUT/artifacts"
COMMON_FLAGS=(-std=c++20 -g -O1 -I"$REPO")
SANITIZE=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
case "$TARGET" in
  gguf)
    ABSL_LIBS="$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format \
      absl_flat_hash_map)"
    LIB_SOURCES=("$REPO"/engine/gguf/*.cc "$REPO/kernels/ggml_type.cc" "$REPO/common/logging.cc")
    SOURCE_DIRS=("$REPO/engine/gguf" "$REPO/kernels" "$REPO/common")
    FUZZ_FLAGS=(-max_len=65536 -dict="$REPO/tests/fuzz/gguf.dict")
    ;;
  openai_request)
    ABSL_LIBS="$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format \
      absl_flat_hash_set absl_hash)"
    LIB_SOURCES=("$REPO/coordinator/http/openai_request.cc" "$REPO/coordinator/http/json_fields.cc")
    SOURCE_DIRS=("$REPO/coordinator/http")
    FUZZ_FLAGS=(-max_len=8192 -dict="$REPO/tests/fuzz/openai_request.dict")
    ;;
  *)
    echo "run_fuzz.sh: unknown target '$TARGET': gguf or openai_request" >&2
    exit 2
    ;;
esac

stale() {  # stale BINARY: true when BINARY is missing or older than a source
  [[ ! -x "$1" ]] && return 0
  [[ -n "$(find "${SOURCE_DIRS[@]}" "$REPO/tests/fuzz" -newer "$1" \
      \( -name '*.cc' -o -name '*.h' \) -print -quit)" ]]
}

FUZZER="$OUT/${TARGET}_fuzz"
if stale "$FUZZER"; then
  echo "building $FUZZER with $CXX"
  "$CXX" "${COMMON_FLAGS[@]}" "${SANITIZE[@]}" "${LIB_SOURCES[@]}" \
    "$REPO/tests/fuzz/${TARGET}_fuzz.cc" -o "$FUZZER" $ABSL_LIBS
fi
if [[ "$TARGET" == gguf ]]; then
  if stale "$OUT/gguf_fuzz_seeds"; then
    echo "building $OUT/gguf_fuzz_seeds with $CXX"
    "$CXX" "${COMMON_FLAGS[@]}" "${LIB_SOURCES[@]}" "$REPO/tests/fuzz/gguf_fuzz_seeds.cc" \
      -o "$OUT/gguf_fuzz_seeds" $ABSL_LIBS
  fi
  "$OUT/gguf_fuzz_seeds" "$OUT/seeds"
  cp "$REPO/tests/reference/gguf/quant_fixture.gguf" "$OUT/seeds/"
else
  cp "$REPO/tests/fuzz/${TARGET}_seeds"/* "$OUT/seeds/"
fi

# New inputs go to corpus/ (kept between runs); seeds/ is read only.
"$FUZZER" \
  -max_total_time="$SECONDS_TO_RUN" \
  -rss_limit_mb=2048 \
  -timeout=10 \
  "${FUZZ_FLAGS[@]}" \
  -artifact_prefix="$OUT/artifacts/" \
  -print_final_stats=1 \
  "$OUT/corpus" "$OUT/seeds"
echo "${TARGET}_fuzz: no crash in ${SECONDS_TO_RUN}s"
