#!/usr/bin/env bash
# Builds a fuzz target with clang++-14 (libFuzzer + ASan + UBSan; the main
# build uses g++) and fuzzes it for SECONDS seconds (default 60). Exits
# non-zero when the fuzzer finds a crash, leak, hang or sanitizer report; the
# reproducer is left in $OUT/artifacts/.
#
#   tests/fuzz/run_fuzz.sh [SECONDS] [TARGET]
#
# TARGET (the source is tests/fuzz/TARGET_fuzz.cc, its seeds TARGET_seeds/):
#   gguf (default)    GgufFile on arbitrary bytes (seeds from gguf_fuzz_seeds.cc)
#   openai_request    the OpenAI HTTP request parser
#   jsonl_request     a `tandem run --requests` line (client/json_request.h)
#   generate_request  bytes as a tandem.v1.GenerateRequest, then the protocol
#                     conversion and the coordinator's request validation
#                     (seeds: text protos, encoded here with protoc)
#   tokenizer         the default model's tokenizer: encode / decode round trip
#   chat_template     the default model's chat template on arbitrary messages
# The tokenizer and chat_template targets read $TANDEM_MODEL (default
# models/SmolLM2-135M-Instruct.Q4_1.gguf).
#
# Output goes to $TANDEM_FUZZ_DIR (default <repo>/build/fuzz/TARGET). Objects
# are compiled one per source into $TANDEM_FUZZ_OBJ_DIR (default obj/ beside
# $TANDEM_FUZZ_DIR), shared by the targets and rebuilt only when the source,
# a header it includes (clang's -MMD list) or this script is newer; writes
# are atomic, so targets may build at once (ctest -j).
set -euo pipefail
shopt -s inherit_errexit

SECONDS_TO_RUN="${1:-60}"
TARGET="${2:-gguf}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCRIPT="$REPO/tests/fuzz/run_fuzz.sh"
OUT="${TANDEM_FUZZ_DIR:-$REPO/build/fuzz/$TARGET}"
OBJ="${TANDEM_FUZZ_OBJ_DIR:-$(dirname "$OUT")/obj}"
CXX="${TANDEM_FUZZ_CXX:-clang++-14}"
PROTOC="${TANDEM_FUZZ_PROTOC:-protoc}"
GEN="$OBJ/proto"  # generated tandem/v1/*.pb.{h,cc}

mkdir -p "$OUT/corpus" "$OUT/seeds" "$OUT/artifacts" "$OBJ"
COMMON_FLAGS=(-std=c++20 -g1 -O1 -I"$REPO")
SANITIZE=(-fsanitize=address,undefined -fno-sanitize-recover=all)
ABSL_MODULES=(absl_status absl_statusor absl_strings absl_str_format absl_flat_hash_map
              absl_flat_hash_set absl_hash)
PKG_MODULES=()
PROTOS=()
GGUF_SOURCES=("$REPO"/engine/gguf/*.cc "$REPO/kernels/ggml_type.cc" "$REPO/common/logging.cc")
TOKENIZER_SOURCES=("$REPO"/engine/tokenizer/*.cc "${GGUF_SOURCES[@]}")
case "$TARGET" in
  gguf)
    LIB_SOURCES=("${GGUF_SOURCES[@]}")
    FUZZ_FLAGS=(-max_len=65536 -dict="$REPO/tests/fuzz/gguf.dict")
    ;;
  openai_request)
    LIB_SOURCES=("$REPO/coordinator/http/openai_request.cc" "$REPO/coordinator/http/json_fields.cc")
    FUZZ_FLAGS=(-max_len=8192 -dict="$REPO/tests/fuzz/openai_request.dict")
    ;;
  jsonl_request)
    LIB_SOURCES=("$REPO/client/json_request.cc" "$REPO/engine/sampling/sampling_params.cc"
                 "$REPO/coordinator/api/beam_search_params.cc"
                 "$REPO/coordinator/decoding/beam_search.cc"
                 "$REPO/coordinator/decoding/beam_hypotheses.cc"
                 "$REPO/draft/api/speculative_spec.cc" "$REPO/common/logging.cc")
    FUZZ_FLAGS=(-max_len=8192 -dict="$REPO/tests/fuzz/jsonl_request.dict")
    ;;
  generate_request)
    PROTOS=(common inference worker)
    PKG_MODULES=(protobuf)
    LIB_SOURCES=("$REPO/protocol/generate_request_codec.cc" "$REPO/protocol/sampling_codec.cc"
                 "$REPO/protocol/beam_search_codec.cc"
                 "$REPO/coordinator/scheduler/request_validation.cc"
                 "$REPO/engine/sampling/sampling_params.cc"
                 "$REPO/coordinator/api/request.cc" "$REPO/coordinator/api/beam_search_params.cc"
                 "$REPO/coordinator/decoding/beam_search.cc"
                 "$REPO/coordinator/decoding/beam_hypotheses.cc"
                 "$REPO/draft/api/speculative_spec.cc" "$REPO/common/logging.cc")
    FUZZ_FLAGS=(-max_len=4096 -dict="$REPO/tests/fuzz/generate_request.dict")
    ;;
  tokenizer)
    LIB_SOURCES=("${TOKENIZER_SOURCES[@]}")
    FUZZ_FLAGS=(-max_len=4096 -dict="$REPO/tests/fuzz/tokenizer.dict")
    ;;
  chat_template)
    LIB_SOURCES=("${TOKENIZER_SOURCES[@]}")
    FUZZ_FLAGS=(-max_len=4096 -dict="$REPO/tests/fuzz/chat_template.dict")
    ;;
  *)
    echo "run_fuzz.sh: unknown target '$TARGET': gguf, openai_request, jsonl_request," \
         "generate_request, tokenizer or chat_template" >&2
    exit 2
    ;;
esac
LIBS="$(pkg-config --libs "${ABSL_MODULES[@]}" ${PKG_MODULES[@]+"${PKG_MODULES[@]}"})"
export TANDEM_MODEL="${TANDEM_MODEL:-$REPO/models/SmolLM2-135M-Instruct.Q4_1.gguf}"

# stale OUTPUT DEPENDENCY...: true when OUTPUT is missing or older than one.
stale() {
  local out="$1" dep
  shift
  [[ -e "$out" ]] || return 0
  for dep in "$@"; do
    [[ -e "$dep" && ! "$dep" -nt "$out" ]] || return 0
  done
  return 1
}

# Writes tandem/v1/NAME.pb.{h,cc} for each of PROTOS under $GEN.
generate_protos() {
  local name stale_any=0
  for name in "$@"; do
    stale "$GEN/tandem/v1/$name.pb.cc" "$REPO/proto/tandem/v1/$name.proto" && stale_any=1
  done
  [[ $stale_any == 1 ]] || return 0
  local tmp sources=()
  for name in "$@"; do sources+=("$REPO/proto/tandem/v1/$name.proto"); done
  tmp="$(mktemp -d "$OBJ/proto.tmp.XXXXXX")"
  echo "protoc ${sources[*]#"$REPO"/}"
  "$PROTOC" --proto_path="$REPO/proto" --cpp_out="$tmp" "${sources[@]}"
  mkdir -p "$GEN/tandem/v1"
  for name in "$@"; do
    mv -f "$tmp/tandem/v1/$name.pb.h" "$GEN/tandem/v1/$name.pb.h"
    mv -f "$tmp/tandem/v1/$name.pb.cc" "$GEN/tandem/v1/$name.pb.cc"
  done
  rm -rf "$tmp"
}

# compile VARIANT SOURCE FLAG...: prints the object of SOURCE under
# $OBJ/VARIANT, compiling it first when it is stale.
compile() {
  local variant="$1" src="$2"
  shift 2
  local rel="${src#"$OBJ"/}"
  rel="${rel#"$REPO"/}"
  local obj="$OBJ/$variant/${rel%.cc}.o"
  local deps=("$SCRIPT" "$src")
  if [[ -f "${obj%.o}.d" ]]; then
    # The header list clang wrote: "target: dep dep \" lines.
    read -r -a deps <<<"$(sed -e '1s/^[^:]*://' -e 's/\\$//' "${obj%.o}.d" | tr '\n' ' ') $SCRIPT"
  fi
  if stale "$obj" "${deps[@]}"; then
    echo "compiling $rel ($variant)" >&2
    mkdir -p "$(dirname "$obj")"
    local tmp="$obj.tmp.$$"
    "$CXX" "${COMMON_FLAGS[@]}" -I"$GEN" "$@" -MMD -MF "$tmp.d" -c "$src" -o "$tmp" || return 1
    mv -f "$tmp.d" "${obj%.o}.d"
    mv -f "$tmp" "$obj"
  fi
  echo "$obj"
}

# link BINARY VARIANT FLAGS_ARRAY_NAME SOURCE...: compiles SOURCE... (with the
# flags in the named array) and links them into BINARY when an object is newer.
link() {
  local binary="$1" variant="$2" flags_name="$3[@]"
  shift 3
  local objects=() src
  for src in "$@"; do
    objects+=("$(compile "$variant" "$src" ${!flags_name+"${!flags_name}"})")
  done
  if stale "$binary" "${objects[@]}"; then
    echo "linking $binary with $CXX"
    local link_flags=("${SANITIZE[@]}" -fsanitize=fuzzer)
    [[ "$variant" == plain ]] && link_flags=()
    # shellcheck disable=SC2086  # LIBS is a word list from pkg-config
    "$CXX" "${link_flags[@]}" "${objects[@]}" -o "$binary.tmp.$$" $LIBS
    mv -f "$binary.tmp.$$" "$binary"
  fi
}

[[ ${#PROTOS[@]} -gt 0 ]] && generate_protos "${PROTOS[@]}"
PROTO_SOURCES=()
for name in ${PROTOS[@]+"${PROTOS[@]}"}; do PROTO_SOURCES+=("$GEN/tandem/v1/$name.pb.cc"); done

FUZZ_COMPILE=("${SANITIZE[@]}" -fsanitize=fuzzer-no-link -DTANDEM_SOURCE_DIR="\"$REPO\"")
FUZZER="$OUT/${TARGET}_fuzz"
link "$FUZZER" fuzz FUZZ_COMPILE "${LIB_SOURCES[@]}" ${PROTO_SOURCES[@]+"${PROTO_SOURCES[@]}"} \
  "$REPO/tests/fuzz/${TARGET}_fuzz.cc"
case "$TARGET" in
  gguf)
    NO_FLAGS=()
    link "$OUT/gguf_fuzz_seeds" plain NO_FLAGS "${LIB_SOURCES[@]}" \
      "$REPO/tests/fuzz/gguf_fuzz_seeds.cc"
    "$OUT/gguf_fuzz_seeds" "$OUT/seeds"
    cp "$REPO/tests/reference/gguf/quant_fixture.gguf" "$OUT/seeds/"
    ;;
  generate_request)
    # Seeds are committed as text protos (readable, reviewable); the fuzzer
    # reads the wire format.
    for seed in "$REPO/tests/fuzz/generate_request_seeds"/*.txtpb; do
      "$PROTOC" --proto_path="$REPO/proto" --encode=tandem.v1.GenerateRequest \
        tandem/v1/inference.proto <"$seed" >"$OUT/seeds/$(basename "${seed%.txtpb}")"
    done
    ;;
  *)
    cp "$REPO/tests/fuzz/${TARGET}_seeds"/* "$OUT/seeds/"
    ;;
esac

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
