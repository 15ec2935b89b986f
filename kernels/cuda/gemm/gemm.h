// Gemm: the CUDA backend's matrix products of many activation rows (prefill,
// decode batches past kMaxGemvBatch)
// against a weight matrix, through its one library wrapper: cuBLAS on real
// GPUs; under TANDEM_CUDA_EMULATION, where there is no cuBLAS, the CPU
// kernels::MatMul on the emulated device memory (which is host memory).
// This is the one place the emulated build substitutes a library.
//
// By weight type (y = x · wᵀ, fp32 accumulation throughout):
// - F32: cublasSgemm on w as stored, in cuBLAS's default math mode, which
//   keeps f32 inputs in f32 (no TF32 rounding; that needs
//   CUBLAS_TF32_TENSOR_OP_MATH, never set here).
// - BF16: x rounded to bf16 (nearest even) into the workspace
//   (RoundToBf16, gemm_operands.cuh), then cublasGemmEx with bf16 A and B,
//   f32 C, CUBLAS_COMPUTE_32F: the products of bf16-rounded x and bf16 w,
//   summed in fp32.
// - Q8_0, Q4_0, Q4_1, F16: w dequantized to f32 into the workspace
//   (DequantizeWeight, with kernels::DequantizeRowRef's bits), then
//   cublasSgemm as for F32.
// So every result equals kernels::MatMul in reference precision
// (quantize_activations = false; for BF16 on bf16-rounded x) up to the
// summation order: within 1e-4 · Σ_k |x_k w_k| (the tests' tolerance).
// Under emulation Run rounds x for BF16 with the same RoundToBf16 kernel and
// calls kernels::MatMul (BestIsa(), quantize_activations = false) on `pool`,
// so the two builds differ only by summation order.
//
// Thread-safety: one Gemm is used by one host thread at a time (its cuBLAS
// handle and workspace are per instance); calls on different instances may
// run concurrently.
#ifndef TANDEM_KERNELS_CUDA_GEMM_GEMM_H_
#define TANDEM_KERNELS_CUDA_GEMM_GEMM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/kernels.h"

namespace tandem::cuda {

class GemmLibrary;

// The largest calls a Gemm serves; they size its workspace at creation, so
// that Run allocates nothing.
struct GemmLimits {
  int64_t max_rows = 0;             // most activation rows n of one call
  int64_t max_cols = 0;             // most w.cols (input features) of any weight
  int64_t max_weight_elements = 0;  // most w.rows · w.cols of a Q8_0 / Q4_0 / Q4_1 / F16
                                    // weight; 0 if none is used
};

class Gemm {
 public:
  // Creates the library state bound to `stream` (on a GPU: a cuBLAS handle
  // with a 32 MiB library workspace, cuBLAS's recommendation for Hopper) and
  // the workspace of GemmWorkspaceElements(limits) floats, all through
  // DeviceBuffer. `pool` (not owned, may be null, must outlive the Gemm) is
  // used only under emulation, where the CPU matmul runs on it.
  // INVALID_ARGUMENT naming the value and the limit for a negative limit,
  // max_rows or max_cols above 2^31 - 1 (cuBLAS's int sizes) or a workspace
  // whose size overflows; RESOURCE_EXHAUSTED when device memory runs out;
  // INTERNAL when cuBLAS cannot start.
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(const GemmLimits& limits, cudaStream_t stream,
                                                      ThreadPool* pool);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[n, w.rows] = x[n, w.cols] · wᵀ, f32 row-major, fp32 accumulation, as
  // the file comment says by weight type.
  //   w: data in device memory (w.packed is not read); F32, BF16, F16, Q8_0,
  //      Q4_0 or Q4_1 as CheckDeviceWeight (weight_check.h) accepts it.
  //   x: [n, w.cols], y: [n, w.rows], device memory; y overlaps neither x
  //      nor w.
  // Enqueued on the stream after its earlier work; returns without waiting
  // on a GPU (under emulation the work is done at return, or recorded into
  // the graph while the stream captures). n = 0 or
  // w.rows = 0 enqueue nothing. INVALID_ARGUMENT naming the value and the
  // limit for: an unsupported weight type or a view CheckDeviceWeight
  // rejects, n outside [0, max_rows], w.cols above max_cols, a Q8_0 / Q4_0 /
  // Q4_1 / F16 weight of more than max_weight_elements elements, w.rows or
  // the row stride in elements above 2^31 - 1. INTERNAL for a failed launch
  // or cuBLAS call.
  absl::Status Run(const kernels::WeightView& w, const float* x, int64_t n, float* y);

  const GemmLimits& limits() const { return limits_; }

 private:
  Gemm(const GemmLimits& limits, DeviceBuffer workspace, std::unique_ptr<GemmLibrary> library);

  GemmLimits limits_;
  // [GemmWorkspaceElements(limits_)] f32: bf16-rounded x for a BF16 weight,
  // or a dequantized weight [w.rows, w.cols].
  DeviceBuffer workspace_;
  std::unique_ptr<GemmLibrary> library_;
};

// Floats in the workspace of a Gemm with `limits` (ones Create accepts):
// max(max_rows · max_cols, max_weight_elements), the larger of its two uses
// (never both in one call). The same in both builds, so that the emulated
// build allocates what a GPU build does apart from cuBLAS's own workspace
// (on a GPU bf16 activations fill half of their f32 room; under emulation
// nothing is dequantized into it).
int64_t GemmWorkspaceElements(const GemmLimits& limits);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_GEMM_H_
