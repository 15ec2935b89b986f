// Rotary position embedding on the GPU, in place, with the convention and
// angle recurrence of kernels::Rope (kernels/cpu/rope.cc).
#ifndef TANDEM_KERNELS_CUDA_LAYERS_ROPE_CUH_
#define TANDEM_KERNELS_CUDA_LAYERS_ROPE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

struct RopeParams {
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // leading elements of each head that rotate; even, <= head_dim
  float freq_base = 10000.0f;
};

// Rotates, for every token t and head h, the pairs (x[2i], x[2i+1]) of the
// head with 2i < rope_dim by positions[t] * freq_base^(-2i / rope_dim)
// (llama's adjacent-pair layout, as GGUF stores llama weights); elements past
// rope_dim are left as they are.
//   x: [num_tokens, num_heads, head_dim] in device memory, updated in place.
//   positions: [num_tokens] in device memory.
// The angles are the reference's bits (the same float recurrence from the
// same host-computed ratio) and the rotation is unfused as in the reference;
// only cosf / sinf differ (within 2 ulp of exact on a GPU, the host's libm
// within 1), so each element is within about (|x0| + |x1|) · 2.4e-7 of
// kernels::Rope's. Runs asynchronously on `stream`. INVALID_ARGUMENT for an
// odd or non-positive rope_dim, rope_dim > head_dim, num_heads < 1,
// freq_base <= 0 or num_tokens outside [0, 2^31); INTERNAL when the launch
// fails.
absl::Status Rope(float* x, const int32_t* positions, const RopeParams& params,
                  cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_LAYERS_ROPE_CUH_
