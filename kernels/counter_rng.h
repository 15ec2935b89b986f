// Counter-based random numbers for sampling. A draw is a pure function of
// (seed, stream, step), so a sequence's tokens depend only on its own seed and
// position: never on batch composition, thread scheduling, the device the
// draw runs on, or whether the sequence was preempted and recomputed. There
// is no generator state to save.
//
// The same functions run on the host (engine/sampling) and in CUDA kernels
// (kernels/cuda/sampling/sample_draw.cu): under nvcc they are __host__ __device__,
// integer arithmetic only, so a device draw equals the host's bit for bit.
//
// Thread-safety: pure functions, safe from any thread.
#ifndef TANDEM_KERNELS_COUNTER_RNG_H_
#define TANDEM_KERNELS_COUNTER_RNG_H_

#include <cstdint>

#include "kernels/host_device.h"

namespace tandem::kernels {

// The splitmix64 finalizer: a bijection on 64-bit words with full avalanche
// (every input bit flips each output bit with probability ~1/2).
TANDEM_HOST_DEVICE constexpr uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64 random bits for (seed, stream, step). Each word is folded in through a
// full Mix64 round, so for a fixed prefix the map from the next word to the
// state is a bijection (distinct steps never collide within a stream), and
// nearby counters give unrelated outputs. The odd constants separate the
// roles so that (a, b, c) and a permutation of it do not coincide.
TANDEM_HOST_DEVICE constexpr uint64_t RandomBits(uint64_t seed, uint64_t stream, uint64_t step) {
  uint64_t h = Mix64(seed ^ 0x6A09E667F3BCC909ull);
  h = Mix64(h ^ (stream * 0xD1B54A32D192ED03ull));
  h = Mix64(h ^ (step * 0xAEF17502108EF2D9ull));
  return Mix64(h);
}

// Uniform in [0, 1) with 53-bit resolution (every multiple of 2^-53 equally
// likely). `stream` is the sample index (n > 1); `step` the index of the token
// being generated (the number of tokens generated before it).
TANDEM_HOST_DEVICE constexpr double UniformDraw(uint64_t seed, uint64_t stream, uint64_t step) {
  return static_cast<double>(RandomBits(seed, stream, step) >> 11) * 0x1.0p-53;
}

// Purposes of extra draws at a step beside UniformDraw's (the token draw).
// Speculative verification needs, at the step of a draft token, an
// acceptance coin and, on rejection, a residual draw that are independent of
// each other and of the token draw the draft itself made with UniformDraw at
// that step (a draft sharing the target's seed uses exactly that value).
enum class DrawPurpose : uint64_t {
  kSpeculativeAccept = 1,
  kSpeculativeResidual = 2,
};

// Uniform in [0, 1), 53-bit resolution, for (seed, stream, step, purpose):
// the step's bits re-mixed with a purpose-specific word, so each purpose is
// its own sub-stream and UniformDraw (the token draw) keeps its values.
TANDEM_HOST_DEVICE constexpr double UniformDraw(uint64_t seed, uint64_t stream, uint64_t step,
                                                DrawPurpose purpose) {
  const uint64_t salt = Mix64(static_cast<uint64_t>(purpose) * 0x9FB21C651E98DF25ull);
  return static_cast<double>(Mix64(RandomBits(seed, stream, step) ^ salt) >> 11) * 0x1.0p-53;
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_COUNTER_RNG_H_
