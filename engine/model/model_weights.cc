#include "engine/model/model_weights.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
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

// The rows [r0, r1) and columns [c0, c1) of the [rows, cols] matrix `name`.
// Quantized, a row range is a pointer offset and a column range one of whole
// blocks (same row_bytes, fewer cols); dequantized, only the slice is kept.
struct Slice {
  int64_t r0, r1, c0, c1;
};

absl::StatusOr<kernels::WeightView> LoadMatrix(const gguf::GgufFile& file, const std::string& name,
                                               int64_t rows, int64_t cols, const Slice& slice,
                                               bool to_f32, ModelWeights& weights) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, FindChecked(file, name, {cols, rows}));
  CHECK(0 <= slice.r0 && slice.r0 <= slice.r1 && slice.r1 <= rows);
  CHECK(0 <= slice.c0 && slice.c0 <= slice.c1 && slice.c1 <= cols);
  const gguf::GgmlTypeTraits& traits = gguf::TypeTraits(t->type);
  const int64_t full_row_bytes = cols / traits.block_size * traits.type_size;
  const uint8_t* first_row = t->data + slice.r0 * full_row_bytes;
  kernels::WeightView view;
  view.type = t->type;
  view.rows = slice.r1 - slice.r0;
  view.cols = slice.c1 - slice.c0;
  view.row_bytes = full_row_bytes;
  if (to_f32 && t->type != gguf::GgmlType::kF32) {
    auto buffer = std::make_unique<float[]>(view.rows * view.cols);
    std::vector<float> row(view.cols == cols ? 0 : cols);
    for (int64_t r = 0; r < view.rows; ++r) {
      float* dst = buffer.get() + r * view.cols;
      const uint8_t* src = first_row + r * full_row_bytes;
      if (view.cols == cols) {
        RETURN_IF_ERROR(gguf::DequantizeRow(t->type, src, cols, dst));
      } else {
        RETURN_IF_ERROR(gguf::DequantizeRow(t->type, src, cols, row.data()));
        std::copy_n(row.data() + slice.c0, view.cols, dst);
      }
    }
    view.type = gguf::GgmlType::kF32;
    view.data = buffer.get();
    view.row_bytes = view.cols * static_cast<int64_t>(sizeof(float));
    weights.owned.push_back(std::move(buffer));
    return view;
  }
  if (slice.c0 % traits.block_size != 0 ||
      (slice.c1 != cols && slice.c1 % traits.block_size != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s: the tensor-parallel column range [%d, %d) does not fall on the %s block "
        "size %d; use fewer ranks or reference precision",
        name, slice.c0, slice.c1, gguf::TypeName(t->type), traits.block_size));
  }
  view.data = first_row + slice.c0 / traits.block_size * traits.type_size;
  return view;
}

}  // namespace

absl::StatusOr<ModelWeights> LoadModelWeights(const gguf::GgufFile& file, const ModelConfig& c,
                                              bool to_f32) {
  ASSIGN_OR_RETURN(parallel::TpShard whole, parallel::PartitionForRank(TpDimsOf(c), 0, 1));
  return LoadModelWeights(file, c, to_f32, whole);
}

absl::StatusOr<ModelWeights> LoadModelWeights(const gguf::GgufFile& file, const ModelConfig& c,
                                              bool to_f32, const parallel::TpShard& shard) {
  ModelWeights w;
  const int64_t hd = c.head_dim;
  // Rows of wq / columns of wo: this rank's query heads; rows of wk, wv: its
  // KV heads; rows of w_gate, w_up / columns of w_down: its FFN range.
  const Slice all_in = {0, 0, 0, c.hidden_dim};  // rows filled in below
  Slice q_rows = all_in, kv_rows = all_in, ffn_rows = all_in;
  q_rows.r0 = shard.q_head_begin * hd;
  q_rows.r1 = shard.q_head_end * hd;
  kv_rows.r0 = shard.kv_head_begin * hd;
  kv_rows.r1 = shard.kv_head_end * hd;
  ffn_rows.r0 = shard.ffn_begin;
  ffn_rows.r1 = shard.ffn_end;
  const Slice q_cols = {0, c.hidden_dim, q_rows.r0, q_rows.r1};
  const Slice ffn_cols = {0, c.hidden_dim, ffn_rows.r0, ffn_rows.r1};
  const Slice whole = {0, c.vocab_size, 0, c.hidden_dim};
  const int64_t hidden = c.hidden_dim;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  // The embedding table stays as stored: rows are dequantized on lookup.
  ASSIGN_OR_RETURN(w.token_embd, LoadMatrix(file, "token_embd.weight", c.vocab_size, hidden,
                                            whole, /*to_f32=*/false, w));
  w.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrFormat("blk.%d.", i);
    LayerWeights& l = w.layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, LoadVector(file, p + "attn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(file, p + "attn_q.weight", q_dim, hidden, q_rows, to_f32, w));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(file, p + "attn_k.weight", kv_dim, hidden, kv_rows, to_f32, w));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(file, p + "attn_v.weight", kv_dim, hidden, kv_rows, to_f32, w));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(file, p + "attn_output.weight", hidden, q_dim, q_cols, to_f32, w));
    ASSIGN_OR_RETURN(l.ffn_norm, LoadVector(file, p + "ffn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(file, p + "ffn_gate.weight", c.ffn_dim, hidden, ffn_rows, to_f32, w));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(file, p + "ffn_up.weight", c.ffn_dim, hidden, ffn_rows, to_f32, w));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(file, p + "ffn_down.weight", hidden, c.ffn_dim, ffn_cols, to_f32, w));
  }
  ASSIGN_OR_RETURN(w.output_norm, LoadVector(file, "output_norm.weight", hidden));
  if (file.FindTensor("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "output.weight", c.vocab_size, hidden, whole, to_f32, w));
  } else {
    w.tied_output = true;
    ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "token_embd.weight", c.vocab_size, hidden, whole, to_f32, w));
  }
  return w;
}

void PackWeightRows(ModelWeights& weights, kernels::Isa isa, ThreadPool* pool) {
  std::vector<kernels::WeightView*> todo;
  for (LayerWeights& l : weights.layers) {
    for (kernels::WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      todo.push_back(w);
    }
  }
  todo.push_back(&weights.output);
  std::erase_if(todo, [isa](const kernels::WeightView* w) {
    return w->packed != nullptr || !kernels::PackedRowsUsed(isa, w->type);
  });
  const size_t first = weights.packed.size();
  for (const kernels::WeightView* w : todo) {
    weights.packed.push_back(std::make_unique<uint8_t[]>(kernels::PackedRows16Bytes(*w)));
  }
  auto pack = [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      kernels::PackRows16(*todo[i], weights.packed[first + i].get());
    }
  };
  const int64_t n = static_cast<int64_t>(todo.size());
  if (pool != nullptr) {
    pool->ParallelFor(n, 1, pack);
  } else {
    pack(0, 0, n);
  }
  for (size_t i = 0; i < todo.size(); ++i) todo[i]->packed = weights.packed[first + i].get();
}

}  // namespace tandem::model
