// GenerateModel: writes a llama-architecture GGUF with random weights of a
// real model's shape and vocabulary size (`tandem make-model`), so throughput
// can be measured on a GPU without downloading weights. The file is streamed
// to disk one tensor at a time: a llama3-8b bf16 file (~16 GB) never needs
// more memory than its largest tensor.
#ifndef TANDEM_ENGINE_MODEL_MODEL_GENERATOR_H_
#define TANDEM_ENGINE_MODEL_MODEL_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_shapes.h"

namespace tandem::model {

// Standard deviation of every random weight matrix; the two projections that
// add into the residual stream (attn_output, ffn_down) are further scaled by
// 1 / sqrt(2 * num_layers), so activations stay O(1) through every layer.
inline constexpr float kGeneratedWeightStd = 0.02f;

// Size of the synthetic vocabulary's fixed prefix: 256 byte tokens, then
// <|endoftext|> (BOS and EOS), <|im_start|>, <|im_end|>.
inline constexpr int32_t kSyntheticVocabMinSize = 259;

// Maps a --dtype name ("bf16", "q8_0"; case-insensitive) to the type of the
// generated matrices. InvalidArgument naming `name` and the accepted names.
absl::StatusOr<gguf::GgmlType> ParseGeneratorDtype(std::string_view name);

// Called after each layer's tensors are written: (layers written, num_layers).
using GenerateProgress = std::function<void(int32_t layers_done, int32_t num_layers)>;

// Writes `out_path` (replaced only when the whole file was written): llama.*
// metadata as llama.cpp's converter writes it; tensors token_embd.weight,
// blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
// ffn_up, ffn_down}.weight, output_norm.weight and output.weight (unless
// shape.tied_output), norms F32 filled with 1, matrices N(0, std) (see
// kGeneratedWeightStd) encoded as `dtype`. Weights are a pure function of
// (seed, tensor index, row): same seed, same bytes, at any thread count.
//
// Tokenizer: when `vocab_source` is non-null and its tokenizer.ggml.tokens
// has exactly shape.vocab_size entries, every tokenizer.* key is copied from
// it; otherwise a synthetic byte-level BPE ("gpt2" model and pre-tokenizer)
// vocabulary of exactly shape.vocab_size tokens is written: the 256 byte
// tokens, the control tokens, then tokens built by merges, with a ChatML
// chat template.
//
// Fails with InvalidArgument naming the field for a dtype other than kBF16 /
// kQ8_0 or an inconsistent shape (non-positive sizes, heads not dividing the
// hidden size, kv heads not dividing heads, an odd head size, widths not a
// multiple of 32 for q8_0, a vocab_size the synthetic vocabulary cannot
// reach); ResourceExhausted naming the needed and available bytes when the
// output's file system lacks the space (checked before writing anything; an
// existing file at `out_path` is not counted as free, since it is replaced
// only at the end); NotFound naming the directory when it does not exist;
// Unavailable naming the path on I/O errors.
absl::Status GenerateModel(const ModelShape& shape, gguf::GgmlType dtype, uint64_t seed,
                           const std::string& out_path, const gguf::GgufFile* vocab_source,
                           const GenerateProgress& progress = {});

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_GENERATOR_H_
