// ModelConfig: the hyper-parameters of a llama-architecture decoder, read from
// GGUF metadata and validated once at load.
#ifndef TANDEM_ENGINE_MODEL_MODEL_CONFIG_H_
#define TANDEM_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_file.h"
#include "engine/parallel/tp_partition.h"

namespace tandem::model {

struct ModelConfig {
  std::string architecture;  // "llama"
  std::string name;          // general.name, for logs
  int32_t num_layers = 0;
  int32_t hidden_dim = 0;
  int32_t ffn_dim = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rope_dim = 0;
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  int32_t context_length = 0;
  int32_t vocab_size = 0;
};

// Reads the `llama.*` keys. Fails with InvalidArgument naming the key when a
// value is missing, non-positive or inconsistent (heads not dividing the
// hidden size, kv heads not dividing heads, rope_dim > head_dim or odd), and
// Unimplemented for an architecture other than llama.
absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file);

// The dimensions tensor parallelism splits.
inline parallel::TpDims TpDimsOf(const ModelConfig& config) {
  return {config.num_heads, config.num_kv_heads, config.ffn_dim};
}

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_CONFIG_H_
