// Model: a llama-architecture decoder (RMSNorm, RoPE, grouped-query
// attention, SwiGLU, tied or separate output head) on the CPU. One Forward
// call runs a batch of many sequences of different lengths — prefill chunks
// and single decode tokens mixed, without padding — reading and writing K/V
// through the paged KV cache.
//
// Tensor parallelism (ModelOptions::tp_world_size > 1): each rank holds its
// KV-head groups (with their query heads) and FFN columns; the KvStorage
// passed to Forward holds only the rank's KV heads (num_kv_heads() below).
// The partial outputs of attention-out (wo) and FFN-down are summed over the
// ranks (Communicator::AllReduceSum, rank order) before the residual add, so
// every rank ends each layer with the same residual stream. The output head
// is replicated: every rank that passes a `logits` buffer computes the same
// logits; ranks other than 0 may pass nullptr to skip the head. At world
// size 1 no collective is called and the results are those of the unsharded
// model bit for bit; at larger sizes the reduction changes the fp32 summation
// order of wo / w_down, so logits differ by rounding only.
//
// Thread-safety: Load is thread-safe; Forward may run on one thread at a time
// (it reuses scratch buffers) and parallelizes internally over the pool.
#ifndef TANDEM_ENGINE_MODEL_MODEL_H_
#define TANDEM_ENGINE_MODEL_MODEL_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "common/thread_pool.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/parallel/tp_partition.h"
#include "kernels/kernels.h"
#include "engine/parallel/communicator.h"

namespace tandem::model {

enum class Precision {
  // Weights stay quantized; activations are quantized per block for integer
  // dot products (as llama.cpp does); KV cache in f16.
  kFast,
  // Weights dequantized to f32, f32 math, f32 KV cache: for exactness tests.
  kReference,
};

struct ModelOptions {
  Precision precision = Precision::kFast;
  int32_t num_threads = 0;  // 0: every core
  // Tensor parallelism: this process is rank `tp_rank` of `tp_world_size`
  // and holds only its TpShard (PartitionForRank) of the attention and FFN
  // weights. With tp_world_size > 1, `communicator` (not owned, outlives the
  // model) must have the same rank and world size; every rank must call
  // Forward with the same batch. With tp_world_size == 1 it is unused.
  int32_t tp_rank = 0;
  int32_t tp_world_size = 1;
  parallel::Communicator* communicator = nullptr;
  // Layer-skip self-speculation: run only the first `num_layers` decoder
  // layers, then the final norm and the output head (0: every layer). The
  // Model then is that truncated model: config().num_layers reads
  // num_layers, only those layers' weights are prepared, and its KvStorage
  // needs only that many layers. Must be in [1, the GGUF's block_count].
  int32_t num_layers = 0;
  // false: the weights stay views of the mapped GGUF (no f32 copies, no
  // packed rows) for a device backend that uploads them (engine/device/);
  // Forward then fails with FailedPrecondition.
  bool cpu_weights = true;
};

// One sequence's work in a forward batch.
struct ForwardSequence {
  std::span<const int32_t> tokens;        // the tokens computed this step
  int32_t start_pos = 0;                  // position of tokens[0]
  std::span<const BlockId> block_table;   // covers positions [0, start_pos + tokens.size())
  int32_t num_logits = 1;                 // logits wanted for the last num_logits tokens
};

class Model {
 public:
  // Maps the GGUF at `path` and prepares the weights (this rank's shard).
  // Fails with NotFound / InvalidArgument naming the path or the offending
  // tensor / key, with InvalidArgument for a tensor-parallel setup that does
  // not fit the model or the communicator (naming both values), and with
  // InvalidArgument for options.num_layers outside [0, block_count] (naming
  // it and the GGUF's layer count).
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                                     const ModelOptions& options);

  // The hyper-parameters this Model runs with: num_layers is the layers it
  // runs (ModelOptions::num_layers when set), everything else the GGUF's.
  const ModelConfig& config() const { return config_; }
  // The decoder layers the GGUF holds (config().num_layers when no layers
  // are skipped).
  int32_t file_num_layers() const { return file_num_layers_; }
  const gguf::GgufFile& file() const { return *file_; }
  Precision precision() const { return options_.precision; }
  kernels::KvDtype kv_dtype() const;
  ThreadPool* pool() { return pool_.get(); }
  // This rank's slice of the model; the whole model at world size 1.
  const parallel::TpShard& shard() const { return shard_; }
  // The group's communicator (ModelOptions::communicator); null for a group
  // of one.
  parallel::Communicator* communicator() const { return options_.communicator; }
  // KV heads this rank's KvStorage must hold (KvStorageConfig::num_kv_heads).
  int32_t num_local_kv_heads() const { return shard_.num_kv_heads(); }

  // Runs the batch. Writes K/V of every token into `kv` and the logits of the
  // last num_logits tokens of each sequence, in batch order, to `logits`
  // ([sum of num_logits, vocab_size]; may be nullptr to skip the output head,
  // e.g. on tensor-parallel ranks other than 0). Fails with InvalidArgument
  // (naming the value and the limit) for token ids outside the vocabulary,
  // positions past the context length or the block tables, an empty batch,
  // or a KvStorage whose num_kv_heads is not num_local_kv_heads(); passes on
  // a communicator's error.
  absl::Status Forward(std::span<const ForwardSequence> batch, kv::KvStorage& kv, float* logits);

  // The checks of Forward that do not depend on the KV storage's contents:
  // InvalidArgument (naming the value and the limit) for an empty batch,
  // token ids outside the vocabulary, positions past the context length or
  // the block tables, block ids outside [0, num_blocks), bad num_logits.
  absl::Status ValidateBatch(std::span<const ForwardSequence> batch, int32_t num_blocks,
                             int32_t block_size) const;

  // The weight views (this rank's shard): GGUF views when loaded with
  // cpu_weights = false.
  const ModelWeights& weights() const { return weights_; }

  // Counts the rows Forward will write to `logits`.
  static int64_t NumLogitRows(std::span<const ForwardSequence> batch);

 private:
  Model(std::unique_ptr<gguf::GgufFile> file, ModelConfig config, int32_t file_num_layers,
        ModelWeights weights, const ModelOptions& options, const parallel::TpShard& shard);
  absl::Status Validate(std::span<const ForwardSequence> batch, const kv::KvStorage& kv) const;
  void Embed(std::span<const ForwardSequence> batch);
  absl::Status Layer(int32_t layer, kv::KvStorage& kv);
  // Sums out_ over the ranks; a no-op at world size 1.
  absl::Status ReducePartials();
  void MatMul(const kernels::WeightView& w, const float* x, int64_t n, float* y);

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  int32_t file_num_layers_ = 0;
  ModelWeights weights_;
  ModelOptions options_;
  parallel::TpShard shard_;
  kernels::MatMulParams matmul_params_;
  kernels::AttentionParams attention_params_;
  kernels::Isa vector_isa_ = kernels::Isa::kReference;  // attention and elementwise kernels
  std::unique_ptr<ThreadPool> pool_;

  // Per-Forward scratch, grown on demand and reused.
  int64_t num_tokens_ = 0;
  std::vector<int32_t> positions_;              // [num_tokens]
  std::vector<int64_t> slots_;                  // [num_tokens]
  std::vector<std::vector<int32_t>> tables_;    // per sequence, block ids as ints
  std::vector<kernels::AttentionSeq> attn_seqs_;
  std::vector<float> x_;                        // [num_tokens, hidden] residual stream
  std::vector<float> h_;                        // [num_tokens, hidden] normed input
  // Head and FFN dimensions below are this rank's shard.
  std::vector<float> q_;                        // [num_tokens, num_heads * head_dim]
  std::vector<float> k_;                        // [num_tokens, num_kv_heads * head_dim]
  std::vector<float> v_;                        // [num_tokens, num_kv_heads * head_dim]
  std::vector<float> attn_;                     // [num_tokens, num_heads * head_dim]
  std::vector<float> gate_;                     // [num_tokens, ffn]
  std::vector<float> up_;                       // [num_tokens, ffn]
  std::vector<float> out_;                      // [num_tokens, hidden] (partial sum under TP)
};

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_H_
