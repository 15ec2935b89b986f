// RoundToBf16: a grid-stride loop, one element per thread per step.
// DequantizeWeight: one block per row, its threads striding over the row's
// elements and decoding each from global memory (quant_device.cuh), as
// EmbeddingGather does; no shared memory, no barrier.
#include "kernels/cuda/gemm/gemm_operands.cuh"

#include <algorithm>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/primitives/quant_device.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

using gguf::GgmlType;

constexpr int kThreads = 256;
// Enough blocks to fill a GPU; a larger input loops.
constexpr int64_t kMaxRoundBlocks = 4096;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

// out: [count] of Out, __nv_bfloat16 or float (the bf16 value widened).
template <typename Out>
__global__ void RoundToBf16Kernel(const float* __restrict__ x, int64_t count,
                                  Out* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const __nv_bfloat16 rounded = __float2bfloat16_rn(x[i]);
    if constexpr (std::is_same_v<Out, float>) {
      out[i] = __bfloat162float(rounded);
    } else {
      out[i] = rounded;
    }
  }
}

template <typename Out>
absl::Status LaunchRound(const float* x, int64_t count, Out* out, cudaStream_t stream) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("RoundToBf16: count %d < 0", count));
  }
  if (count == 0) return absl::OkStatus();
  const int64_t blocks = std::min(kMaxRoundBlocks, (count + kThreads - 1) / kThreads);
  TANDEM_LAUNCH(RoundToBf16Kernel<Out>, static_cast<unsigned>(blocks), kThreads, 0, stream, x,
                count, out);
  return LaunchStatus("RoundToBf16Kernel");
}

// w: [gridDim.x rows, row_bytes apart] of kType; out: [gridDim.x, cols].
template <GgmlType kType>
__global__ void DequantizeKernel(const uint8_t* __restrict__ w, int64_t cols, int64_t row_bytes,
                                 float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const uint8_t* row = w + r * row_bytes;
  float* row_out = out + r * cols;
  for (int64_t e = threadIdx.x; e < cols; e += blockDim.x) {
    row_out[e] = DequantElement<kType>(row, e);
  }
}

template <GgmlType kType>
absl::Status LaunchDequantize(const kernels::WeightView& w, float* out, cudaStream_t stream) {
  // Whole warps, no more than the row needs.
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (w.cols + 31) / 32 * 32));
  TANDEM_LAUNCH(DequantizeKernel<kType>, static_cast<unsigned>(w.rows), threads, 0, stream,
                static_cast<const uint8_t*>(w.data), w.cols, w.row_bytes, out);
  return LaunchStatus("DequantizeKernel");
}

}  // namespace

absl::Status RoundToBf16(const float* x, int64_t count, __nv_bfloat16* out, cudaStream_t stream) {
  return LaunchRound(x, count, out, stream);
}

absl::Status RoundToBf16(const float* x, int64_t count, float* out, cudaStream_t stream) {
  return LaunchRound(x, count, out, stream);
}

absl::Status DequantizeWeight(const kernels::WeightView& w, float* out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckDeviceWeight(w, "DequantizeWeight"));
  if (w.rows > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DequantizeWeight: rows %d above the limit %d", w.rows, kMaxGridX));
  }
  if (w.rows == 0) return absl::OkStatus();
  switch (w.type) {
    case GgmlType::kF32:
      return LaunchDequantize<GgmlType::kF32>(w, out, stream);
    case GgmlType::kF16:
      return LaunchDequantize<GgmlType::kF16>(w, out, stream);
    case GgmlType::kBF16:
      return LaunchDequantize<GgmlType::kBF16>(w, out, stream);
    case GgmlType::kQ8_0:
      return LaunchDequantize<GgmlType::kQ8_0>(w, out, stream);
    case GgmlType::kQ4_0:
      return LaunchDequantize<GgmlType::kQ4_0>(w, out, stream);
    default:
      return LaunchDequantize<GgmlType::kQ4_1>(w, out, stream);
  }
}

}  // namespace tandem::cuda
