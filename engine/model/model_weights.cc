#include "engine/model/model_weights.h"

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/gguf/dequantize.h"

namespace tandem::model {
namespace {

absl::StatusOr<const gguf::TensorInfo*> FindChecked(const gguf::GgufFile& file,
                                                    const std::string& name,
                                                    std::vector<int64_t> dims) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrFormat("tensor %s is missing", name));
  if (t->dims != dims) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor %s has dims [%s], expected [%s]",
                                                      name, absl::StrJoin(t->dims, ", "),
                                                      absl::StrJoin(dims, ", ")));
  }
  if (!gguf::TypeTraits(t->type).supported) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor %s has type %s, which tandem cannot read",
                                                      name, gguf::TypeName(t->type)));
  }
  return t;
}

absl::StatusOr<std::vector<float>> LoadVector(const gguf::GgufFile& file, const std::string& name,
                                              int64_t n) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, FindChecked(file, name, {n}));
  std::vector<float> out(n);
  RETURN_IF_ERROR(gguf::DequantizeRow(t->type, t->data, n, out.data()));
  return out;
}

absl::StatusOr<kernels::WeightView> LoadMatrix(const gguf::GgufFile& file, const std::string& name,
                                               int64_t rows, int64_t cols, bool to_f32,
                                               ModelWeights& weights) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, FindChecked(file, name, {cols, rows}));
  const gguf::GgmlTypeTraits& traits = gguf::TypeTraits(t->type);
  kernels::WeightView view;
  view.type = t->type;
  view.data = t->data;
  view.rows = rows;
  view.cols = cols;
  view.row_bytes = cols / traits.block_size * traits.type_size;
  if (to_f32 && t->type != gguf::GgmlType::kF32) {
    auto buffer = std::make_unique<float[]>(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      RETURN_IF_ERROR(gguf::DequantizeRow(t->type, t->data + r * view.row_bytes, cols,
                                          buffer.get() + r * cols));
    }
    view.type = gguf::GgmlType::kF32;
    view.data = buffer.get();
    view.row_bytes = cols * static_cast<int64_t>(sizeof(float));
    weights.owned.push_back(std::move(buffer));
  }
  return view;
}

}  // namespace

absl::StatusOr<ModelWeights> LoadModelWeights(const gguf::GgufFile& file, const ModelConfig& c,
                                              bool to_f32) {
  ModelWeights w;
  const int64_t hidden = c.hidden_dim;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  // The embedding table stays as stored: rows are dequantized on lookup.
  ASSIGN_OR_RETURN(w.token_embd, LoadMatrix(file, "token_embd.weight", c.vocab_size, hidden,
                                            /*to_f32=*/false, w));
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrFormat("blk.%d.", i);
    LayerWeights& l = w.layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, LoadVector(file, p + "attn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(file, p + "attn_q.weight", q_dim, hidden, to_f32, w));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(file, p + "attn_k.weight", kv_dim, hidden, to_f32, w));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(file, p + "attn_v.weight", kv_dim, hidden, to_f32, w));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(file, p + "attn_output.weight", hidden, q_dim, to_f32, w));
    ASSIGN_OR_RETURN(l.ffn_norm, LoadVector(file, p + "ffn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(file, p + "ffn_gate.weight", c.ffn_dim, hidden, to_f32, w));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(file, p + "ffn_up.weight", c.ffn_dim, hidden, to_f32, w));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(file, p + "ffn_down.weight", hidden, c.ffn_dim, to_f32, w));
  }
  ASSIGN_OR_RETURN(w.output_norm, LoadVector(file, "output_norm.weight", hidden));
  if (file.FindTensor("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "output.weight", c.vocab_size, hidden, to_f32, w));
  } else {
    w.tied_output = true;
    ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "token_embd.weight", c.vocab_size, hidden, to_f32, w));
  }
  return w;
}

}  // namespace tandem::model
