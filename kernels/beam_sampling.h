// Beam sampling's pieces that the host (engine/sampling/beam_candidates.cc)
// and the CUDA kernels (kernels/cuda/sampling/beam_sample.cu) share, so both keep the
// same tokens and draw the same keys:
//   BeamNucleusSize  transformers' TopPLogitsWarper and MinPLogitsWarper
//                    with min_tokens_to_keep = 2, as beam search uses them
//   GumbelNoise      the Gumbel noise a token's key adds to its score
// On a GPU, CUDA's double log is within an ulp of the host's, so a key may
// differ from the host's in its last bit; under emulation they are equal.
//
// Thread-safety: pure functions, safe from any thread.
#ifndef TANDEM_KERNELS_BEAM_SAMPLING_H_
#define TANDEM_KERNELS_BEAM_SAMPLING_H_

#include <math.h>

#include <cstdint>

#include "kernels/counter_rng.h"
#include "kernels/host_device.h"

namespace tandem::kernels {

// transformers' warpers keep this many tokens when num_beams > 1.
inline constexpr int32_t kBeamMinTokensToKeep = 2;

// How many of the n candidates, sorted best first with weights[i] =
// e^(score_i - best score) (float, as the warpers' softmax computes them),
// survive top-p then min-p: the tail whose probability mass is at most
// 1 - top_p goes, then the tail below min_p times the best probability,
// never below kBeamMinTokensToKeep. Probabilities are weight / Σ weights in
// double, summed in order. top_p >= 1 and min_p <= 0 are off.
TANDEM_HOST_DEVICE inline int32_t BeamNucleusSize(const float* weights, int32_t n, float top_p,
                                                  float min_p) {
  if (n <= kBeamMinTokensToKeep || (top_p >= 1.0f && min_p <= 0.0f)) return n;
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += weights[i];
  int32_t nucleus = n;
  if (top_p < 1.0f) {
    double tail = 0.0;
    while (nucleus > kBeamMinTokensToKeep && tail + weights[nucleus - 1] / sum <= 1.0 - top_p) {
      tail += weights[--nucleus] / sum;
    }
  }
  if (min_p > 0.0f) {
    const double floor = min_p * (weights[0] / sum);
    while (nucleus > kBeamMinTokensToKeep && weights[nucleus - 1] / sum < floor) --nucleus;
  }
  return nucleus;
}

// Standard Gumbel noise for `token` at the draw (seed, stream, step):
// -log(-log(u)) with u uniform in (0, 1), never 0, so both logs are finite.
TANDEM_HOST_DEVICE inline float GumbelNoise(uint64_t seed, uint64_t stream, uint64_t step,
                                            int32_t token) {
  const uint64_t salt = static_cast<uint64_t>(token) * 0xC2B2AE3D27D4EB4Full;
  const uint64_t bits = Mix64(RandomBits(seed, stream, step) ^ salt);
  const double u = (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
  return static_cast<float>(-log(-log(u)));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_BEAM_SAMPLING_H_
