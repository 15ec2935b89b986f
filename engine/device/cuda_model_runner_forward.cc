// CudaModelRunner's step work: Forward (layers, attention, head) and
// CopyBlocks. Construction and memory are in cuda_model_runner.cc.
#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/device/cuda_model_runner.h"
#include "kernels/cuda/attention/kv_cache.cuh"
#include "kernels/cuda/attention/paged_attention_decode.cuh"
#include "kernels/cuda/attention/paged_attention_prefill.cuh"
#include "kernels/cuda/gemm/gemv.cuh"
#include "kernels/cuda/layers/embedding.cuh"
#include "kernels/cuda/layers/rms_norm.cuh"
#include "kernels/cuda/layers/rope.cuh"
#include "kernels/cuda/layers/silu_mul.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::device {
namespace {

bool IsQuantized(gguf::GgmlType type) {
  return type != gguf::GgmlType::kF32 && type != gguf::GgmlType::kBF16;
}

}  // namespace

absl::Status CudaModelRunner::Project(const kernels::WeightView& w, const float* x, int64_t n,
                                      float* y) {
  if (n <= cuda::kMaxGemvBatch) return cuda::Gemv(w, x, n, y, stream_);
  // The GEMM dequantizes a quantized matrix whole into its workspace, which
  // is sized for the layer matrices; a bigger one (the output head kept
  // quantized) goes through GEMVs of kMaxGemvBatch rows.
  if (!IsQuantized(w.type) || w.rows * w.cols <= weights_.max_quantized_layer_elements) {
    return gemm_->Run(w, x, n, y);
  }
  for (int64_t r = 0; r < n; r += cuda::kMaxGemvBatch) {
    const int64_t m = std::min<int64_t>(cuda::kMaxGemvBatch, n - r);
    RETURN_IF_ERROR(cuda::Gemv(w, x + r * w.cols, m, y + r * w.rows, stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaModelRunner::Forward(std::span<const model::ForwardSequence> batch,
                                      float* logits) {
  RETURN_IF_ERROR(Body(batch));
  if (logits != nullptr && model::Model::NumLogitRows(batch) > 0) {
    RETURN_IF_ERROR(Head(batch, logits));
  }
  return cuda::CudaStatus(cudaStreamSynchronize(stream_), "forward");
}

absl::Status CudaModelRunner::Body(std::span<const model::ForwardSequence> batch) {
  if (num_blocks_ == 0 || !batch_.has_value()) return NoCacheError();
  RETURN_IF_ERROR(SelectDevice());
  RETURN_IF_ERROR(model_->ValidateBatch(batch, num_blocks_, block_size_));
  const std::optional<DecodeGraphs::Shape> shape = GraphShape(batch);
  if (!shape.has_value()) {
    RETURN_IF_ERROR(batch_->Upload(batch, stream_));
    return BodyKernels();
  }
  // Every batch of the shape passes the kernels the same sizes.
  RETURN_IF_ERROR(batch_->Upload(batch, stream_,
                                 shape->num_partitions * cuda::kDefaultDecodePartitionSize));
  return graphs_.Run(*shape, stream_, [this] { return BodyKernels(); });
}

std::optional<DecodeGraphs::Shape> CudaModelRunner::GraphShape(
    std::span<const model::ForwardSequence> batch) const {
  if (!options_.cuda_graphs || batch.empty()) return std::nullopt;
  if (comm_ != nullptr && !comm_->capturable()) return std::nullopt;  // NCCL before 2.9
  cuda::PagedAttentionDecodeParams attention;  // the kernel's own split of the context
  for (const model::ForwardSequence& s : batch) {
    if (s.tokens.size() != 1) return std::nullopt;
    attention.max_context_len = std::max(attention.max_context_len, s.start_pos + 1);
  }
  return DecodeGraphs::Shape{static_cast<int32_t>(batch.size()),
                             cuda::NumDecodePartitions(attention)};
}

absl::Status CudaModelRunner::BodyKernels() {
  const model::ModelConfig& c = model_->config();
  const int64_t n = batch_->num_tokens();
  RETURN_IF_ERROR(cuda::EmbeddingGather(weights_.token_embd.view, batch_->token_ids(), n,
                                        x_.as<float>(), stream_));
  for (int32_t layer = 0; layer < c.num_layers; ++layer) RETURN_IF_ERROR(Layer(layer));
  // The last layer's FFN output joins the residual here, as each layer's
  // joins it in the next layer's first norm.
  const cuda::RmsNormParams norm{n, c.hidden_dim, c.rms_norm_eps};
  return cuda::AddRmsNorm(x_.as<float>(), out_.as<float>(), weights_.output_norm.as<float>(),
                          h_.as<float>(), norm, stream_);
}

absl::Status CudaModelRunner::Layer(int32_t layer) {
  const model::ModelConfig& c = model_->config();
  const DeviceLayer& w = weights_.layers[layer];
  const int64_t n = batch_->num_tokens();
  float* x = x_.as<float>();
  float* h = h_.as<float>();
  // Attention block. Layer 0 starts from the embedding; later layers first
  // add the previous layer's FFN output to the residual.
  const cuda::RmsNormParams norm{n, c.hidden_dim, c.rms_norm_eps};
  RETURN_IF_ERROR(cuda::AddRmsNorm(x, layer == 0 ? nullptr : out_.as<float>(),
                                   w.attn_norm.as<float>(), h, norm, stream_));
  RETURN_IF_ERROR(Project(w.wq.view, h, n, q_.as<float>()));
  RETURN_IF_ERROR(Project(w.wk.view, h, n, k_.as<float>()));
  RETURN_IF_ERROR(Project(w.wv.view, h, n, v_.as<float>()));
  cuda::RopeParams rope{n, model_->shard().num_q_heads(), c.head_dim, c.rope_dim,
                        c.rope_freq_base};
  RETURN_IF_ERROR(cuda::Rope(q_.as<float>(), batch_->positions(), rope, stream_));
  rope.num_heads = model_->shard().num_kv_heads();
  RETURN_IF_ERROR(cuda::Rope(k_.as<float>(), batch_->positions(), rope, stream_));
  // Every token's K/V is written before attention reads, as on the CPU.
  RETURN_IF_ERROR(cuda::WriteKv(LayerView(layer), k_.as<float>(), v_.as<float>(),
                                batch_->slots(), n, stream_));
  RETURN_IF_ERROR(Attention(layer));
  RETURN_IF_ERROR(Project(w.wo.view, attn_.as<float>(), n, out_.as<float>()));
  RETURN_IF_ERROR(ReducePartials());
  // Feed-forward block.
  RETURN_IF_ERROR(
      cuda::AddRmsNorm(x, out_.as<float>(), w.ffn_norm.as<float>(), h, norm, stream_));
  RETURN_IF_ERROR(Project(w.w_gate.view, h, n, gate_.as<float>()));
  RETURN_IF_ERROR(Project(w.w_up.view, h, n, up_.as<float>()));
  RETURN_IF_ERROR(cuda::SiluMul(gate_.as<float>(), up_.as<float>(), n * ffn_, stream_));
  RETURN_IF_ERROR(Project(w.w_down.view, gate_.as<float>(), n, out_.as<float>()));
  return ReducePartials();
}

absl::Status CudaModelRunner::ReducePartials() {
  if (comm_ == nullptr) return absl::OkStatus();
  return comm_->AllReduceSum(out_.as<float>(), batch_->num_tokens() * model_->config().hidden_dim,
                             stream_);
}

absl::Status CudaModelRunner::Attention(int32_t layer) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(model_->config().head_dim));
  const cuda::PagedKvCache cache = LayerCache(layer);
  if (batch_->all_decode()) {
    cuda::PagedAttentionDecodeParams p;
    p.q = q_.as<float>();  // one row per sequence, in batch order
    p.out = attn_.as<float>();
    p.block_tables = batch_->block_tables();
    p.context_lens = batch_->context_lens();
    p.num_seqs = batch_->num_seqs();
    p.num_heads = model_->shard().num_q_heads();
    p.max_blocks_per_seq = batch_->max_blocks_per_seq();
    p.max_context_len = batch_->max_context_len();
    p.scale = scale;
    p.workspace = decode_workspace_.data();
    ASSIGN_OR_RETURN(int64_t needed, cuda::PagedAttentionDecodeWorkspaceBytes(p, cache));
    if (needed > decode_workspace_.bytes()) {
      return absl::InternalError(absl::StrFormat(
          "decode attention needs %d bytes of workspace, %d were allocated", needed,
          decode_workspace_.bytes()));
    }
    return cuda::PagedAttentionDecode(p, cache, stream_);
  }
  cuda::PagedAttentionPrefillParams p;
  p.q = q_.as<float>();
  p.out = attn_.as<float>();
  p.seqs = batch_->seqs();
  p.block_tables = batch_->block_tables();
  p.num_seqs = batch_->num_seqs();
  p.num_heads = model_->shard().num_q_heads();
  p.max_blocks_per_seq = batch_->max_blocks_per_seq();
  p.max_q_len = batch_->max_q_len();
  p.scale = scale;
  return cuda::PagedAttentionPrefill(p, cache, stream_);
}

absl::StatusOr<int64_t> CudaModelRunner::GatherLogitRows(
    std::span<const model::ForwardSequence> batch) {
  const int64_t hidden = model_->config().hidden_dim;
  int64_t row = 0;
  int64_t rows = 0;
  for (const model::ForwardSequence& s : batch) {
    const int64_t len = static_cast<int64_t>(s.tokens.size());
    if (s.num_logits > 0) {
      RETURN_IF_ERROR(cuda::CudaStatus(
          cudaMemcpyAsync(out_.as<float>() + rows * hidden,
                          h_.as<float>() + (row + len - s.num_logits) * hidden,
                          s.num_logits * hidden * sizeof(float), cudaMemcpyDeviceToDevice,
                          stream_),
          "gathering the logit rows"));
    }
    rows += s.num_logits;
    row += len;
  }
  return rows;
}

absl::Status CudaModelRunner::ChunkLogits(int64_t first, int64_t count) {
  const int64_t hidden = model_->config().hidden_dim;
  return Project(weights_.output.view, out_.as<float>() + first * hidden, count,
                 logits_.as<float>());
}

absl::Status CudaModelRunner::Head(std::span<const model::ForwardSequence> batch,
                                   float* logits) {
  const int64_t vocab = model_->config().vocab_size;
  ASSIGN_OR_RETURN(const int64_t rows, GatherLogitRows(batch));
  for (int64_t r = 0; r < rows; r += logits_rows_) {
    const int64_t m = std::min<int64_t>(logits_rows_, rows - r);
    RETURN_IF_ERROR(ChunkLogits(r, m));
    RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(logits + r * vocab, logits_.as<float>(), m * vocab * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "copying logits to the host"));
    // logits_ is reused by the next chunk: its copy must be done.
    RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream_), "logits"));
  }
  return absl::OkStatus();
}

absl::Status CudaModelRunner::CopyBlocks(std::span<const kv::BlockCopy> copies) {
  if (num_blocks_ == 0) return NoCacheError();
  RETURN_IF_ERROR(SelectDevice());
  // CopyKvBlocks runs its copies concurrently: a group ends before a copy
  // that reads a block the group writes or writes one it reads or writes,
  // which keeps the orders' sequential meaning.
  absl::flat_hash_set<int32_t> reads, writes;
  size_t begin = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    const int32_t src = copies[i].src.value();
    const int32_t dst = copies[i].dst.value();
    const bool conflict = writes.contains(src) || writes.contains(dst) || reads.contains(dst);
    if (conflict || i - begin == kMaxCopiesPerLaunch) {
      RETURN_IF_ERROR(CopyBlockGroup(copies.subspan(begin, i - begin)));
      reads.clear();
      writes.clear();
      begin = i;
    }
    reads.insert(src);
    writes.insert(dst);
  }
  if (begin < copies.size()) RETURN_IF_ERROR(CopyBlockGroup(copies.subspan(begin)));
  return cuda::CudaStatus(cudaStreamSynchronize(stream_), "KV block copies");
}

absl::Status CudaModelRunner::CopyBlockGroup(std::span<const kv::BlockCopy> copies) {
  std::vector<int32_t> src, dst;
  for (const kv::BlockCopy& c : copies) {
    src.push_back(c.src.value());
    dst.push_back(c.dst.value());
  }
  const int64_t bytes = static_cast<int64_t>(src.size() * sizeof(int32_t));
  RETURN_IF_ERROR(copy_src_.Upload(src.data(), bytes, 0, stream_));
  RETURN_IF_ERROR(copy_dst_.Upload(dst.data(), bytes, 0, stream_));
  for (int32_t layer = 0; layer < model_->config().num_layers; ++layer) {
    RETURN_IF_ERROR(cuda::CopyKvBlocks(LayerView(layer), copy_src_.as<int32_t>(),
                                       copy_dst_.as<int32_t>(), static_cast<int64_t>(src.size()),
                                       stream_));
  }
  // The id arrays are overwritten by the next group.
  return cuda::CudaStatus(cudaStreamSynchronize(stream_), "KV block copies");
}

}  // namespace tandem::device
