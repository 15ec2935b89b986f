// ModelWeights: views of every llama tensor in the mapped GGUF, checked for
// shape and type once at load. Matrices stay quantized in the mapping (fast
// mode) or are dequantized to owned f32 copies (reference-precision mode).
//
// Thread-safety: immutable after LoadModelWeights; share freely.
#ifndef TANDEM_ENGINE_MODEL_MODEL_WEIGHTS_H_
#define TANDEM_ENGINE_MODEL_MODEL_WEIGHTS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/parallel/tp_partition.h"
#include "kernels/kernels.h"

namespace tandem::model {

// Under tensor parallelism the head and FFN dimensions are the rank's shard
// (TpShard): num_heads = its query heads, num_kv_heads = its KV heads, ffn =
// its FFN columns.
struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  kernels::WeightView wq;        // [num_heads * head_dim, hidden]
  kernels::WeightView wk;        // [num_kv_heads * head_dim, hidden]
  kernels::WeightView wv;        // [num_kv_heads * head_dim, hidden]
  kernels::WeightView wo;        // [hidden, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  kernels::WeightView w_gate;    // [ffn, hidden]
  kernels::WeightView w_up;      // [ffn, hidden]
  kernels::WeightView w_down;    // [hidden, ffn]
};

struct ModelWeights {
  kernels::WeightView token_embd;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [hidden]
  kernels::WeightView output;      // [vocab, hidden]; token_embd when the head is tied
  bool tied_output = false;
  // Dequantized matrices (reference-precision mode); the views above point here.
  std::vector<std::unique_ptr<float[]>> owned;
  // Row-interleaved copies of the quantized matrices (PackWeightRows); the
  // views' `packed` fields point here.
  std::vector<std::unique_ptr<uint8_t[]>> packed;
};

// Builds the views. With `dequantize_to_f32` every matrix is converted to f32
// (needs 4 bytes per parameter). Fails with InvalidArgument naming the tensor
// when one is missing, has the wrong shape, or a type tandem cannot read.
absl::StatusOr<ModelWeights> LoadModelWeights(const gguf::GgufFile& file, const ModelConfig& config,
                                              bool dequantize_to_f32);

// The same for one tensor-parallel rank: only `shard`'s slices of the
// attention and FFN matrices (norms, embedding and output head whole).
// Quantized, slices are views into the mapping; a column slice of wo or
// w_down that does not start on a block boundary of the tensor's type fails
// with InvalidArgument naming the tensor, the range and the block size.
absl::StatusOr<ModelWeights> LoadModelWeights(const gguf::GgufFile& file, const ModelConfig& config,
                                              bool dequantize_to_f32, const parallel::TpShard& shard);

// Gives every quantized projection and the output head a row-interleaved copy
// (kernels::PackRows16) when MatMul at `isa` reads one for its type: decode-
// sized batches then run about 3× faster on AVX-512 (every batch size on
// AVX2, 4-bit types) with bit-identical results. Costs one more copy of those
// matrices in memory. Matrices are packed in parallel on `pool` (may be null).
void PackWeightRows(ModelWeights& weights, kernels::Isa isa, ThreadPool* pool);

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_WEIGHTS_H_
