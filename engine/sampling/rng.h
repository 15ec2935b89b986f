// The sampler's counter-based random numbers: kernels/counter_rng.h, where
// the host and the CUDA kernels share one definition (see there for the
// contract). A draw is a pure function of (seed, stream, step).
#ifndef TANDEM_ENGINE_SAMPLING_RNG_H_
#define TANDEM_ENGINE_SAMPLING_RNG_H_

#include "kernels/counter_rng.h"

namespace tandem::sampling {

using kernels::DrawPurpose;
using kernels::Mix64;
using kernels::RandomBits;
using kernels::UniformDraw;

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_RNG_H_
