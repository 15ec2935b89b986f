#include "engine/model/model.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/gguf/dequantize.h"

namespace tandem::model {

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                                   const ModelOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(*file));
  const int32_t file_num_layers = config.num_layers;
  if (options.num_layers < 0 || options.num_layers > file_num_layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_layers %d (layer-skip L) is out of range: %s has %d layers, L must be in [1, %d] "
        "(0 = every layer)",
        options.num_layers, path, file_num_layers, file_num_layers));
  }
  // Layer-skip: the truncated model is a model with fewer layers, so the
  // weights below load only those and every consumer of config() (KV sizing,
  // KvStorage) sees L layers.
  if (options.num_layers > 0) config.num_layers = options.num_layers;
  ASSIGN_OR_RETURN(parallel::TpShard shard,
                   parallel::PartitionForRank(TpDimsOf(config), options.tp_rank, options.tp_world_size));
  if (options.tp_world_size > 1) {
    if (options.communicator == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor-parallel world size %d needs a communicator", options.tp_world_size));
    }
    if (options.communicator->rank() != options.tp_rank ||
        options.communicator->world_size() != options.tp_world_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor-parallel rank %d of %d does not match the communicator's rank %d of %d",
          options.tp_rank, options.tp_world_size, options.communicator->rank(),
          options.communicator->world_size()));
    }
  }
  ASSIGN_OR_RETURN(ModelWeights weights,
                   LoadModelWeights(*file, config,
                                    options.cpu_weights && options.precision == Precision::kReference,
                                    shard));
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(config), file_num_layers,
                                          std::move(weights), options, shard));
}

Model::Model(std::unique_ptr<gguf::GgufFile> file, ModelConfig config, int32_t file_num_layers,
             ModelWeights weights, const ModelOptions& options, const parallel::TpShard& shard)
    : file_(std::move(file)),
      config_(std::move(config)),
      file_num_layers_(file_num_layers),
      weights_(std::move(weights)),
      options_(options),
      shard_(shard),
      pool_(std::make_unique<ThreadPool>(options.num_threads)) {
  matmul_params_.isa = kernels::BestIsa();
  matmul_params_.quantize_activations = options_.precision == Precision::kFast;
  if (matmul_params_.quantize_activations && options_.cpu_weights) {
    PackWeightRows(weights_, matmul_params_.isa, pool_.get());
  }
  if (options_.cpu_weights) {
    TANDEM_LOG(kInfo, "model: CPU kernels %s (TANDEM_ISA=avx2|scalar lowers it), %d threads",
               kernels::IsaName(matmul_params_.isa), pool_->num_threads());
  }
  // Reference precision keeps attention and the elementwise ops on their
  // scalar reference code; only the weights' dot products differ by ISA.
  vector_isa_ = options_.precision == Precision::kFast ? kernels::BestIsa()
                                                       : kernels::Isa::kReference;
  attention_params_.isa = vector_isa_;
  attention_params_.num_heads = shard_.num_q_heads();
  attention_params_.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
}

kernels::KvDtype Model::kv_dtype() const {
  return options_.precision == Precision::kFast ? kernels::KvDtype::kF16 : kernels::KvDtype::kF32;
}

int64_t Model::NumLogitRows(std::span<const ForwardSequence> batch) {
  int64_t rows = 0;
  for (const ForwardSequence& s : batch) rows += s.num_logits;
  return rows;
}

absl::Status Model::Validate(std::span<const ForwardSequence> batch,
                             const kv::KvStorage& kv) const {
  if (!options_.cpu_weights) {
    return absl::FailedPreconditionError(
        "this model was loaded for a device backend (cpu_weights = false); the CPU cannot run it");
  }
  if (kv.config().num_kv_heads != shard_.num_kv_heads()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the KV storage holds %d KV heads, this model (rank %d of %d) computes %d",
        kv.config().num_kv_heads, shard_.rank, shard_.world_size, shard_.num_kv_heads()));
  }
  if (kv.config().num_layers < config_.num_layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the KV storage holds %d layers, this model runs %d", kv.config().num_layers,
        config_.num_layers));
  }
  return ValidateBatch(batch, kv.config().num_blocks, kv.config().block_size);
}

absl::Status Model::ValidateBatch(std::span<const ForwardSequence> batch, int32_t num_blocks,
                                  int32_t block_size) const {
  if (batch.empty()) return absl::InvalidArgumentError("forward batch is empty");
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSequence& s = batch[i];
    if (s.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("batch sequence %d has no tokens", i));
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "token id %d is out of range: the vocabulary has %d tokens", t, config_.vocab_size));
      }
    }
    const int64_t end = static_cast<int64_t>(s.start_pos) + static_cast<int64_t>(s.tokens.size());
    if (s.start_pos < 0 || end > config_.context_length) {
      return absl::InvalidArgumentError(
          absl::StrFormat("positions [%d, %d) exceed the context length %d", s.start_pos, end,
                          config_.context_length));
    }
    if (end > static_cast<int64_t>(s.block_table.size()) * block_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "positions up to %d need %d blocks of %d tokens, the block table has %d", end,
          (end + block_size - 1) / block_size, block_size, s.block_table.size()));
    }
    for (BlockId b : s.block_table) {
      if (b.value() < 0 || b.value() >= num_blocks) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "block id %d is out of range: the cache has %d blocks", b.value(), num_blocks));
      }
    }
    if (s.num_logits < 0 || s.num_logits > static_cast<int32_t>(s.tokens.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "num_logits %d is out of range: must be in [0, %d]", s.num_logits, s.tokens.size()));
    }
  }
  return absl::OkStatus();
}

void Model::MatMul(const kernels::WeightView& w, const float* x, int64_t n, float* y) {
  kernels::MatMul(w, x, n, y, matmul_params_, pool_.get());
}

void Model::Embed(std::span<const ForwardSequence> batch) {
  const int64_t hidden = config_.hidden_dim;
  const kernels::WeightView& e = weights_.token_embd;
  int64_t row = 0;
  for (const ForwardSequence& s : batch) {
    for (int32_t t : s.tokens) {
      const auto* src = static_cast<const uint8_t*>(e.data) + static_cast<int64_t>(t) * e.row_bytes;
      // Validated at load: the embedding type is readable, so this cannot fail.
      CHECK(gguf::DequantizeRow(e.type, src, hidden, x_.data() + row * hidden).ok());
      ++row;
    }
  }
}

absl::Status Model::Forward(std::span<const ForwardSequence> batch, kv::KvStorage& kv,
                            float* logits) {
  RETURN_IF_ERROR(Validate(batch, kv));
  const ModelConfig& c = config_;
  const int32_t block_size = kv.config().block_size;
  num_tokens_ = 0;
  for (const ForwardSequence& s : batch) num_tokens_ += static_cast<int64_t>(s.tokens.size());
  const int64_t n = num_tokens_;
  const int64_t q_dim = static_cast<int64_t>(shard_.num_q_heads()) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shard_.num_kv_heads()) * c.head_dim;
  const int64_t ffn = shard_.ffn_size();
  positions_.resize(n);
  slots_.resize(n);
  x_.resize(n * c.hidden_dim);
  h_.resize(n * c.hidden_dim);
  q_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  attn_.resize(n * q_dim);
  gate_.resize(n * ffn);
  up_.resize(n * ffn);
  out_.resize(n * c.hidden_dim);
  attn_seqs_.resize(batch.size());

  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSequence& s = batch[i];
    std::span<const int32_t> table = AsInts(s.block_table);
    kernels::AttentionSeq& a = attn_seqs_[i];
    a.q_begin = row;
    a.q_len = static_cast<int64_t>(s.tokens.size());
    a.start_pos = s.start_pos;
    a.block_table = table.data();
    a.num_blocks = static_cast<int64_t>(table.size());
    for (size_t j = 0; j < s.tokens.size(); ++j, ++row) {
      int32_t pos = s.start_pos + static_cast<int32_t>(j);
      positions_[row] = pos;
      slots_[row] = static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size;
    }
  }

  Embed(batch);
  for (int32_t layer = 0; layer < c.num_layers; ++layer) RETURN_IF_ERROR(Layer(layer, kv));

  // Gather the rows that need logits, then the final norm and the head.
  const int64_t num_rows = NumLogitRows(batch);
  if (num_rows == 0 || logits == nullptr) return absl::OkStatus();
  row = 0;
  int64_t out_row = 0;
  for (const ForwardSequence& s : batch) {
    int64_t first = row + static_cast<int64_t>(s.tokens.size()) - s.num_logits;
    for (int64_t r = first; r < row + static_cast<int64_t>(s.tokens.size()); ++r, ++out_row) {
      std::copy_n(x_.data() + r * c.hidden_dim, c.hidden_dim, out_.data() + out_row * c.hidden_dim);
    }
    row += static_cast<int64_t>(s.tokens.size());
  }
  kernels::RmsNorm(out_.data(), weights_.output_norm.data(), num_rows, c.hidden_dim,
                   c.rms_norm_eps, h_.data(), vector_isa_, pool_.get());
  MatMul(weights_.output, h_.data(), num_rows, logits);
  return absl::OkStatus();
}

absl::Status Model::ReducePartials() {
  if (shard_.world_size == 1) return absl::OkStatus();
  return options_.communicator->AllReduceSum(out_.data(), num_tokens_ * config_.hidden_dim);
}

absl::Status Model::Layer(int32_t layer, kv::KvStorage& kv) {
  const ModelConfig& c = config_;
  const int64_t num_heads = shard_.num_q_heads();
  const int64_t num_kv_heads = shard_.num_kv_heads();
  const LayerWeights& w = weights_.layers[layer];
  const int64_t n = num_tokens_;
  const int64_t hidden = c.hidden_dim;

  // Attention block: x += Wo · attention(rope(Wq h), rope(Wk h), Wv h), h = norm(x).
  kernels::RmsNorm(x_.data(), w.attn_norm.data(), n, hidden, c.rms_norm_eps, h_.data(),
                   vector_isa_, pool_.get());
  {
    const kernels::WeightView qkv[] = {w.wq, w.wk, w.wv};
    float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
    kernels::MatMulMany(qkv, h_.data(), n, qkv_out, matmul_params_, pool_.get());
  }
  kernels::Rope(q_.data(), positions_.data(), n, num_heads, c.head_dim, c.rope_dim,
                c.rope_freq_base);
  kernels::Rope(k_.data(), positions_.data(), n, num_kv_heads, c.head_dim, c.rope_dim,
                c.rope_freq_base);
  // Every token's K/V is written before any attention reads, so sequences in
  // one batch that share a block (prefix cache) see each other's writes.
  kernels::PagedKvView cache = kv.LayerView(layer);
  kernels::WriteKv(cache, k_.data(), v_.data(), slots_.data(), n);
  kernels::PagedAttention(q_.data(), attn_seqs_, cache, attention_params_, attn_.data(),
                          pool_.get());
  MatMul(w.wo, attn_.data(), n, out_.data());
  RETURN_IF_ERROR(ReducePartials());
  kernels::Add(x_.data(), out_.data(), n * hidden, pool_.get());

  // Feed-forward block: x += W_down · (silu(W_gate h) * W_up h), h = norm(x).
  kernels::RmsNorm(x_.data(), w.ffn_norm.data(), n, hidden, c.rms_norm_eps, h_.data(),
                   vector_isa_, pool_.get());
  {
    const kernels::WeightView gate_up[] = {w.w_gate, w.w_up};
    float* const gate_up_out[] = {gate_.data(), up_.data()};
    kernels::MatMulMany(gate_up, h_.data(), n, gate_up_out, matmul_params_, pool_.get());
  }
  kernels::SiluMul(gate_.data(), up_.data(), n * shard_.ffn_size(), vector_isa_, pool_.get());
  MatMul(w.w_down, gate_.data(), n, out_.data());
  RETURN_IF_ERROR(ReducePartials());
  kernels::Add(x_.data(), out_.data(), n * hidden, pool_.get());
  return absl::OkStatus();
}

}  // namespace tandem::model
