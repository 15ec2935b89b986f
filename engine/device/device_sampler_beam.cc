// DeviceSampler's beam-search stages (see device_sampler.h): the plain
// beams' candidates from the draw's kept lists, and beam sampling's
// (kernels/cuda/sampling/beam_sample.cuh).
#include <algorithm>

#include "common/status_macros.h"
#include "engine/device/device_sampler.h"
#include "kernels/cuda/sampling/beam_sample.cuh"
#include "kernels/cuda/sampling/top_k.cuh"

namespace tandem::device {

bool DeviceSampler::BeamSampleKeptList(const sampling::SamplingParams& p) {
  return p.top_k > 0 && p.top_k <= cuda::kTopKMaxCandidates;
}

void DeviceSampler::PlanBeamSample(int32_t r, const sampling::SamplingRow& row) {
  const sampling::SamplingParams& p = *row.params;
  if (p.beam_candidates <= 0 || !p.beam_sample) return;
  beam_sample_host_.push_back({.row = r,
                               .kept_list = BeamSampleKeptList(p),
                               .top_k = p.top_k,
                               .top_p = p.top_p,
                               .min_p = p.min_p,
                               .seed = row.seed,
                               .stream = row.stream,
                               .step = row.output_tokens.size()});
  beam_sample_best_.push_back({p.beam_candidates, 1.0f, 0.0f});
}

absl::Status DeviceSampler::GatherBeamCandidates(int32_t num_rows, int32_t width,
                                                 cudaStream_t stream) {
  if (width == 0) return absl::OkStatus();
  return cuda::GatherKeptCandidates(
      {processed_.as<float>(), kept_tokens_.as<int32_t>(),
       kept_results_.as<cuda::TopKRowResult>(), beam_tokens_.as<int32_t>(),
       beam_scores_.as<float>(), width, num_rows, vocab_size_},
      stream);
}

absl::Status DeviceSampler::SampleBeams(cudaStream_t stream) {
  if (beam_sample_host_.empty()) return absl::OkStatus();
  const int32_t m = static_cast<int32_t>(beam_sample_host_.size());
  RETURN_IF_ERROR(beam_sample_rows_.UploadAll(beam_sample_host_, stream));
  const auto* rows = beam_sample_rows_.as<cuda::BeamSampleRowParams>();
  RETURN_IF_ERROR(cuda::BeamSampleKeys(
      {processed_.as<float>(), rows, kept_tokens_.as<int32_t>(), kept_weights_.as<float>(),
       kept_results_.as<cuda::TopKRowResult>(), keys_.as<float>(), m, vocab_size_},
      stream));
  // The best keys of each row (k = its beam_candidates), into the kept_*
  // lists' first m rows: the stages before read them already.
  RETURN_IF_ERROR(KeepCandidates(keys_.as<float>(), beam_sample_best_, stream));
  return cuda::GatherBeamSamples(
      {processed_.as<float>(), keys_.as<float>(), rows, kept_tokens_.as<int32_t>(),
       kept_results_.as<cuda::TopKRowResult>(), beam_tokens_.as<int32_t>(),
       beam_scores_.as<float>(), beam_keys_.as<float>(), tokens_.as<int32_t>(), beam_width_, m,
       vocab_size_},
      stream);
}

}  // namespace tandem::device
