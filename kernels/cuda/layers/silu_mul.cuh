// The SwiGLU activation of a llama FFN on the GPU: gate = silu(gate) · up.
#ifndef TANDEM_KERNELS_CUDA_LAYERS_SILU_MUL_CUH_
#define TANDEM_KERNELS_CUDA_LAYERS_SILU_MUL_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// gate[i] = gate[i] / (1 + e^-gate[i]) · up[i] for i < n; gate, up: [n] in
// device memory (for a batch, [num_tokens, ffn_dim] flattened). Within a
// relative 1e-6 of kernels::SiluMul: expf (at most 2 ulp) rather than the
// fast __expf, whose error grows as 2 + 1.2·|x| ulp and would exceed 1e-6
// for |gate| above ~5. Runs asynchronously on `stream`. INVALID_ARGUMENT
// for n < 0; INTERNAL when the launch fails.
absl::Status SiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_LAYERS_SILU_MUL_CUH_
