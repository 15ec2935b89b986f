// ModelShape: the published hyper-parameters of well-known llama-architecture
// models, so `tandem make-model` can write a file of a real model's shape
// (random weights) and throughput can be measured without the real weights.
#ifndef TANDEM_ENGINE_MODEL_MODEL_SHAPES_H_
#define TANDEM_ENGINE_MODEL_MODEL_SHAPES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::model {

// Plain data; the fields mirror the GGUF llama.* keys.
struct ModelShape {
  std::string name;            // "llama3-8b"
  int32_t num_layers = 0;      // llama.block_count
  int32_t hidden_dim = 0;      // llama.embedding_length
  int32_t ffn_dim = 0;         // llama.feed_forward_length
  int32_t num_heads = 0;       // llama.attention.head_count
  int32_t num_kv_heads = 0;    // llama.attention.head_count_kv
  int32_t vocab_size = 0;      // llama.vocab_size
  int32_t context_length = 0;  // llama.context_length
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the head reuses token_embd.weight
  // Not a GGUF key: the standard deviation of the generated output.weight (0:
  // the generator's default, kGeneratedWeightStd). A larger one gives logits
  // of a few units, so the next-token distribution is peaked like a trained
  // model's rather than nearly flat, and sampled tokens do not hinge on the
  // last bits of a logit.
  float output_std = 0.0f;
};

// Every known shape, in a fixed order.
const std::vector<ModelShape>& KnownModelShapes();

// The shape called `name` ("llama3-8b", "llama2-7b", "smollm2-135m", "toy", "tiny",
// "toy-head").
// InvalidArgument naming `name` and listing the known shapes otherwise.
absl::StatusOr<ModelShape> FindModelShape(std::string_view name);

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_SHAPES_H_
