// ModelRunner: one replica of a loaded Model on one device, with the KV cache
// pages it computes through. The step executor drives it; which device runs
// the forward (the CPU kernels, or the CUDA backend in engine/device/) is
// the runner's business, and every runner gives the same ForwardSequence
// contract as Model::Forward.
//
// Thread-safety: one call at a time (the step executor serializes them).
#ifndef TANDEM_ENGINE_MODEL_MODEL_RUNNER_H_
#define TANDEM_ENGINE_MODEL_MODEL_RUNNER_H_

#include <cstdint>
#include <span>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/kv/block_copy.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"

namespace tandem::model {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // The model this runner computes: config, tokenizer file, host thread pool.
  virtual Model& model() = 0;
  // The device, for logs ("cpu", "cuda", "cuda (emulated on the CPU)").
  virtual const char* device_name() const = 0;

  // Replaces the KV cache by a zeroed one of `num_blocks` blocks of
  // `block_size` tokens (this rank's KV heads, the model's KV dtype). The old
  // cache is released first, so peak memory stays at one cache. On failure
  // (InvalidArgument for bad geometry, ResourceExhausted for memory) the
  // runner has no cache and Forward fails until a reset succeeds.
  virtual absl::Status ResetKvCache(int32_t num_blocks, int32_t block_size) = 0;

  // Copy-on-write orders, in order: every layer's K and V of block src go to
  // block dst. The caller has checked the ids against the cache.
  virtual absl::Status CopyBlocks(std::span<const kv::BlockCopy> copies) = 0;

  // As Model::Forward through this runner's cache: K/V of every token are
  // written, and the logits of the last num_logits tokens of each sequence
  // go, in batch order, to host memory `logits` ([rows, vocab]; nullptr
  // skips the head). InvalidArgument as Model::Forward, and for a batch past
  // the runner's capacity (naming it); FailedPrecondition without a cache.
  virtual absl::Status Forward(std::span<const ForwardSequence> batch, float* logits) = 0;

  // Sampling on the device, for runners whose logits are computed there
  // (the CUDA runner's DeviceSampler): true when ForwardSample is available.
  virtual bool samples_on_device() const { return false; }

  // As Forward, but the logits stay on the device: logits row
  // logit_rows[i] (the batch-order index Forward would write it at) is
  // sampled there with rows[i] (its `logits` not read) into results[i], as
  // the Sampler would (a beam row: its candidates; a row with a draft_token:
  // the verifier's decision there, SpeculativeVerifier::VerifyPosition). A
  // row the device leaves to the host (device/device_sampler.h says which)
  // gets token -1, its index i appended
  // to *host_rows, and its raw logits copied to host `logits` at its row
  // ([rows, vocab], as Forward's); no other row is copied. Fails as Forward;
  // Unimplemented where samples_on_device() is false.
  virtual absl::Status ForwardSample(std::span<const ForwardSequence> batch,
                                     std::span<const int64_t> logit_rows,
                                     std::span<const sampling::SamplingRow> rows,
                                     std::span<sampling::SampleResult> results, float* logits,
                                     std::vector<int32_t>* host_rows) {
    return absl::UnimplementedError(
        absl::StrCat("sampling on the device: the ", device_name(), " runner has none"));
  }
};

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_MODEL_RUNNER_H_
