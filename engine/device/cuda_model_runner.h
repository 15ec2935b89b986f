// CudaModelRunner: a Model run by the CUDA kernels of kernels/cuda on one
// GPU, with its weights (DeviceWeights) and its paged KV cache in device
// memory. The forward is the CPU Model's, step for step: embedding gather,
// then per layer fused add + RMSNorm, q/k/v projections, RoPE, KV write,
// paged attention (the decode kernel when every sequence computes one token,
// else the prefill kernel), the output projection, add + RMSNorm, gate/up,
// SiLU·up and the down projection; a final add + RMSNorm and the output head
// on the rows that want logits, which are copied to the host, or sampled on
// the device (ForwardSample, DeviceSampler) with only the tokens and their
// logprobs copied back. Projections of up to cuda::kMaxGemvBatch rows are
// GEMVs, larger ones go through the cuBLAS wrapper (cuda::Gemm).
//
// Decode steps (every sequence one token) run their body as a CUDA graph
// per batch shape (DecodeGraphs, CudaOptions::cuda_graphs): DeviceBatch lays
// such a batch out for its shape, so a replay passes the kernels what a
// direct launch would and the logits are the same bits. A graph holds the
// GEMVs or cuBLAS GEMMs of its batch size and, under tensor parallelism,
// the group's all-reduces (NCCL collectives are capturable; every rank sees
// the same steps, so every rank captures and replays alike, as NCCL
// requires).
//
// Numerics: fp32 activations and accumulation. With CudaWeights::kNative and
// an f32 KV cache (Precision::kReference) every kernel equals the CPU
// reference up to summation order; with kBf16 weights are rounded to bf16
// and GEMMs round activations to bf16.
//
// Memory: weights at Create; every scratch buffer at Create, sized for
// CudaOptions::max_batched_tokens; the KV cache at ResetKvCache. Forward and
// CopyBlocks allocate no device memory (cuda::DeviceAllocationCount).
//
// Built twice from the same sources: against the real CUDA runtime and
// cuBLAS, and against the emulator (TANDEM_CUDA_EMULATION), where it runs
// on the CPU.
//
// Tensor parallelism: a sharded model (ModelOptions::tp_world_size > 1)
// holds its rank's KV heads and FFN columns, exactly as on the CPU; after
// attention-out and FFN-down the partial outputs are summed across the group
// on the device (DeviceCommunicator: NCCL, or the host Communicator under
// emulation) before joining the residual. Each rank runs on the device its
// local rank selects (CudaOptions::gpus); every entry point selects it again
// for the calling thread.
//
// Thread-safety: as ModelRunner.
#ifndef TANDEM_ENGINE_DEVICE_CUDA_MODEL_RUNNER_H_
#define TANDEM_ENGINE_DEVICE_CUDA_MODEL_RUNNER_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/device/decode_graphs.h"
#include "engine/device/device_batch.h"
#include "engine/device/device_communicator.h"
#include "engine/device/device_options.h"
#include "engine/device/device_sampler.h"
#include "engine/device/device_weights.h"
#include "engine/model/model_runner.h"
#include "kernels/cuda/attention/paged_kv_cache.cuh"
#include "kernels/cuda/gemm/gemm.h"
#include "kernels/cuda/runtime/device_buffer.h"

namespace tandem::device {

// Copy orders one CopyKvBlocks launch takes; more go in several launches.
inline constexpr int32_t kMaxCopiesPerLaunch = 1024;
// Decode graphs a runner keeps (shapes: decode batch sizes times the
// context's split-K partitions); later shapes run directly.
inline constexpr int32_t kMaxDecodeGraphs = 128;

// FailedPrecondition: Forward or CopyBlocks before a successful reset.
absl::Status NoCacheError();

class CudaModelRunner : public model::ModelRunner {
 public:
  // Uploads `model`'s weights (loaded with ModelOptions::cpu_weights =
  // false; `model` must outlive the runner) and allocates the scratch.
  // With a sharded model this is a collective: every rank of the group calls
  // it together (it joins the device communicator). InvalidArgument for bad
  // options or a device ordinal this node lacks;
  // ResourceExhausted when device memory runs out; INTERNAL for a CUDA error.
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Create(model::Model* model,
                                                                 const CudaOptions& options);
  ~CudaModelRunner() override;

  model::Model& model() override { return *model_; }
  const char* device_name() const override;
  absl::Status ResetKvCache(int32_t num_blocks, int32_t block_size) override;
  absl::Status CopyBlocks(std::span<const kv::BlockCopy> copies) override;
  absl::Status Forward(std::span<const model::ForwardSequence> batch, float* logits) override;
  bool samples_on_device() const override { return sampler_.has_value(); }
  absl::Status ForwardSample(std::span<const model::ForwardSequence> batch,
                             std::span<const int64_t> logit_rows,
                             std::span<const sampling::SamplingRow> rows,
                             std::span<sampling::SampleResult> results, float* logits,
                             std::vector<int32_t>* host_rows) override;

  // KV blocks of `block_size` tokens that fit in what `fraction` of the
  // device's total memory leaves after everything allocated so far (call it
  // before ResetKvCache). ResourceExhausted naming the numbers when not one
  // block fits.
  absl::StatusOr<int32_t> NumKvBlocksForMemoryFraction(double fraction, int32_t block_size) const;

  const DeviceWeights& weights() const { return weights_; }
  // The decode graphs captured so far (their counters).
  const DecodeGraphs& decode_graphs() const { return graphs_; }

 private:
  CudaModelRunner(model::Model* model, const CudaOptions& options, cudaStream_t stream);
  // Create's per-rank part: the device, stream, weights and scratch.
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateOnDevice(
      model::Model* model, const CudaOptions& options);
  absl::Status AllocateScratch();
  // Makes device_ordinal_ the calling thread's current device.
  absl::Status SelectDevice() const;
  // Tensor parallelism: out_ (this rank's partial) <- the group's sum.
  absl::Status ReducePartials();
  int64_t KvBytesPerBlock(int32_t block_size) const;
  // Layer `layer`'s K or V pages (plane 0 / 1).
  void* KvPlane(int32_t layer, int plane) const;
  kernels::PagedKvView LayerView(int32_t layer) const;
  cuda::PagedKvCache LayerCache(int32_t layer) const;
  // y[n, w.rows] = x[n, w.cols] · wᵀ: GEMV for few rows, else the GEMM.
  absl::Status Project(const kernels::WeightView& w, const float* x, int64_t n, float* y);
  absl::Status Layer(int32_t layer);
  absl::Status Attention(int32_t layer);
  // The forward up to the final norm (h_): embedding and every layer; a
  // decode batch through graphs_.
  absl::Status Body(std::span<const model::ForwardSequence> batch);
  // A batch's decode-graph shape, or nullopt when it runs without a graph
  // (graphs off, a step with a prefill chunk, or an NCCL too old to
  // capture collectives).
  std::optional<DecodeGraphs::Shape> GraphShape(
      std::span<const model::ForwardSequence> batch) const;
  // Body's kernels over the uploaded batch_: what a decode graph captures.
  absl::Status BodyKernels();
  // The normed rows that want logits, gathered into out_; returns how many.
  absl::StatusOr<int64_t> GatherLogitRows(std::span<const model::ForwardSequence> batch);
  // logits_ <- the output head on rows [first, first + count) of out_.
  absl::Status ChunkLogits(int64_t first, int64_t count);
  // Final rows of every sequence → host `logits`, in chunks of logits_rows_.
  absl::Status Head(std::span<const model::ForwardSequence> batch, float* logits);
  // ForwardSample's head: each chunk's requested rows sampled by sampler_.
  absl::Status HeadSample(std::span<const model::ForwardSequence> batch,
                          std::span<const int64_t> logit_rows,
                          std::span<const sampling::SamplingRow> rows,
                          std::span<sampling::SampleResult> results, float* logits,
                          std::vector<int32_t>* host_rows);
  // Copies one group of copy orders with no block both written and read.
  absl::Status CopyBlockGroup(std::span<const kv::BlockCopy> copies);

  model::Model* model_;
  CudaOptions options_;
  cudaStream_t stream_ = nullptr;
  int device_ordinal_ = 0;
  std::unique_ptr<DeviceCommunicator> comm_;  // null for a group of one
  DeviceWeights weights_;
  std::unique_ptr<cuda::Gemm> gemm_;
  std::optional<DeviceBatch> batch_;  // made at ResetKvCache (depends on block_size)
  // Rank 0 with CudaOptions::sample_on_device: samples logits_ chunks.
  std::optional<DeviceSampler> sampler_;
  DecodeGraphs graphs_{kMaxDecodeGraphs};  // holds batch_'s and kv_'s addresses
  int64_t q_dim_ = 0, kv_dim_ = 0, ffn_ = 0;
  int32_t logits_rows_ = 0;  // rows of the device logits buffer
  // Scratch, [max_batched_tokens, ...] f32 (see model.h for the shapes).
  cuda::DeviceBuffer x_, h_, q_, k_, v_, attn_, gate_, up_, out_;
  cuda::DeviceBuffer logits_;            // [logits_rows_, vocab]
  cuda::DeviceBuffer decode_workspace_;  // split-K partials of the decode attention
  cuda::DeviceBuffer copy_src_, copy_dst_;  // [kMaxCopiesPerLaunch] block ids
  // The KV cache: per layer a K and a V plane.
  cuda::DeviceBuffer kv_;
  int64_t kv_plane_bytes_ = 0;
  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;
};

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_CUDA_MODEL_RUNNER_H_
