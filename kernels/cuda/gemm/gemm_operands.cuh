// The operand conversions around Gemm's library call (gemm.h): activations
// rounded to bfloat16 for a BF16 weight, and GGUF-encoded weights
// dequantized to f32 for cublasSgemm. Host-callable with the host compiler;
// the kernels are in gemm_operands.cu.
#ifndef TANDEM_KERNELS_CUDA_GEMM_GEMM_OPERANDS_CUH_
#define TANDEM_KERNELS_CUDA_GEMM_GEMM_OPERANDS_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/kernels.h"

namespace tandem::cuda {

// out[i] = x[i] rounded to bfloat16, to nearest with ties to even
// (__float2bfloat16_rn), for i < count. x, out: device memory, not
// overlapping. Runs asynchronously on `stream`. INVALID_ARGUMENT for
// count < 0; INTERNAL when the launch fails.
absl::Status RoundToBf16(const float* x, int64_t count, __nv_bfloat16* out, cudaStream_t stream);

// The same rounding, each result widened back to f32 (exact): bf16-rounded
// activations for a reader of f32, such as the CPU matmul that stands in
// for cuBLAS under emulation. Same contract otherwise.
absl::Status RoundToBf16(const float* x, int64_t count, float* out, cudaStream_t stream);

// out[r, c] = element c of row r of `w`, dequantized with the bits of
// kernels::DequantizeRowRef.
//   w: data in device memory (w.packed is not read); type F32, F16, BF16,
//      Q8_0, Q4_0 or Q4_1.
//   out: [w.rows, w.cols] f32 in device memory, not overlapping w.
// Runs asynchronously on `stream`. INVALID_ARGUMENT when CheckDeviceWeight
// rejects w or w.rows is above 2^31 - 1 (one block per row); INTERNAL when
// the launch fails.
absl::Status DequantizeWeight(const kernels::WeightView& w, float* out, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_GEMM_OPERANDS_CUH_
