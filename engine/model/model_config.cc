#include "engine/model/model_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace tandem::model {
namespace {

// Largest value accepted for any dimension: far above real models, low enough
// that products of two dimensions cannot overflow int64.
constexpr int64_t kMaxDim = 1 << 20;

absl::StatusOr<int32_t> ReadDim(const gguf::GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(int64_t value, file.GetInt(key));
  if (value <= 0 || value > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GGUF key %s = %d is out of range: must be in [1, %d]", key, value, kMaxDim));
  }
  return static_cast<int32_t>(value);
}

}  // namespace

absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.GetString("general.architecture"));
  if (c.architecture != "llama") {
    return absl::UnimplementedError(absl::StrFormat(
        "model architecture '%s' is not supported: tandem runs 'llama'", c.architecture));
  }
  if (file.FindMetadata("general.name") != nullptr) {
    ASSIGN_OR_RETURN(c.name, file.GetString("general.name"));
  }
  const std::string p = c.architecture + ".";
  ASSIGN_OR_RETURN(c.num_layers, ReadDim(file, p + "block_count"));
  ASSIGN_OR_RETURN(c.hidden_dim, ReadDim(file, p + "embedding_length"));
  ASSIGN_OR_RETURN(c.ffn_dim, ReadDim(file, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_heads, ReadDim(file, p + "attention.head_count"));
  c.num_kv_heads = c.num_heads;
  if (file.FindMetadata(p + "attention.head_count_kv") != nullptr) {
    ASSIGN_OR_RETURN(c.num_kv_heads, ReadDim(file, p + "attention.head_count_kv"));
  }
  ASSIGN_OR_RETURN(c.context_length, ReadDim(file, p + "context_length"));
  if (c.hidden_dim % c.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding_length %d is not a multiple of head_count %d", c.hidden_dim, c.num_heads));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "head_count %d is not a multiple of head_count_kv %d", c.num_heads, c.num_kv_heads));
  }
  c.head_dim = c.hidden_dim / c.num_heads;
  c.rope_dim = c.head_dim;
  if (file.FindMetadata(p + "rope.dimension_count") != nullptr) {
    ASSIGN_OR_RETURN(c.rope_dim, ReadDim(file, p + "rope.dimension_count"));
  }
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rope.dimension_count %d must be even and at most the head size %d", c.rope_dim,
        c.head_dim));
  }
  if (file.FindMetadata(p + "rope.freq_base") != nullptr) {
    ASSIGN_OR_RETURN(double base, file.GetFloat(p + "rope.freq_base"));
    c.rope_freq_base = static_cast<float>(base);
  }
  if (file.FindMetadata(p + "attention.layer_norm_rms_epsilon") != nullptr) {
    ASSIGN_OR_RETURN(double eps, file.GetFloat(p + "attention.layer_norm_rms_epsilon"));
    c.rms_norm_eps = static_cast<float>(eps);
  }
  if (!(c.rope_freq_base > 0) || !(c.rms_norm_eps > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rope.freq_base %g and layer_norm_rms_epsilon %g must be > 0", c.rope_freq_base,
        c.rms_norm_eps));
  }
  if (file.FindMetadata(p + "vocab_size") != nullptr) {
    ASSIGN_OR_RETURN(c.vocab_size, ReadDim(file, p + "vocab_size"));
  } else {
    const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
    if (embd == nullptr || embd->dims.size() != 2) {
      return absl::InvalidArgumentError("no vocab_size key and no 2-D token_embd.weight tensor");
    }
    c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  }
  return c;
}

}  // namespace tandem::model
