// Quantized matrix-vector products for decode on the GPU: a handful of
// activation rows against a weight matrix read once, dequantized in
// registers.
#ifndef TANDEM_KERNELS_CUDA_GEMM_GEMV_CUH_
#define TANDEM_KERNELS_CUDA_GEMM_GEMV_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/kernels.h"

namespace tandem::cuda {

// The most activation rows one Gemv call takes: decode steps of a few
// sequences. Larger batches belong to a GEMM, which reuses each weight tile
// across many rows.
inline constexpr int64_t kMaxGemvBatch = 8;

// y[n, w.rows] = x[n, w.cols] · wᵀ, f32 row-major, fp32 accumulation.
//   w: data in device memory (w.packed is not read); type Q8_0, Q4_0, Q4_1,
//      BF16, F16 or F32.
//   x: [n, w.cols], y: [n, w.rows], both in device memory; y must not
//      overlap x or w.
// Versus kernels::MatMul in reference precision (quantize_activations =
// false) each y differs only by summation order: within 1e-4 · Σ_k |x_k w_k|
// (the tests' tolerance; the rounding of two fp32 sums of SmolLM-sized rows
// in different orders stays near 1e-6 of it). Runs asynchronously on
// `stream`. INVALID_ARGUMENT for another weight type, w.cols not a positive
// multiple of the type's block, row_bytes too small for cols, n outside
// [0, kMaxGemvBatch] or more than 2^33 rows; INTERNAL when the launch fails.
absl::Status Gemv(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                  cudaStream_t stream);

// Whether Gemv reads w and x with 16-byte vector loads: BF16 / F16 rows of
// whole 8-element chunks, rows and x on 16-byte boundaries (as the device
// weights are laid out); else element by element. Both give the same bits.
bool GemvVectorizes(const kernels::WeightView& w, const float* x);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_GEMV_CUH_
