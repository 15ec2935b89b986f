// Gemv: one warp per output row, four rows per block. A row is read as
// groups of 32 elements (one Q8_0 / Q4_0 / Q4_1 block, or 32 plain values),
// each split into four parts of 8 elements; a lane dequantizes one part into
// registers and multiply-adds it against every activation row, so each
// weight byte is loaded once for all n rows. The lanes' partial sums meet in
// a warp-shuffle reduction; no shared memory, no block barrier.
//
// 16-bit plain weights (BF16, F16) whose rows, and the activations, allow
// 16-byte accesses take Gemv16Kernel instead: a lane loads 8 consecutive
// elements as one 16-byte vector (a warp: 512 contiguous bytes per load),
// kUnroll of them before the first is used, and their activations as two
// float4 — an eighth of the scalar path's load instructions. A profile of
// the scalar path on an H100 (docs/benchmarks.md, GPU benchmark) read a
// bf16 8B model's layers at 14% of the copy bandwidth for one sequence.
#include "kernels/cuda/gemm/gemv.cuh"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/primitives/quant_device.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/quant_formats.h"

namespace tandem::cuda {
namespace {

using gguf::GgmlType;

constexpr int kWarpSize = 32;
constexpr int kRowsPerBlock = 4;
constexpr int kGroup = 32;         // elements per group
constexpr int kPartsPerGroup = 4;  // lanes per group
constexpr int kPart = kGroup / kPartsPerGroup;
constexpr int kGroupsPerStep = kWarpSize / kPartsPerGroup;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
static_assert(kGroup == gguf::kQK);

template <GgmlType kType>
constexpr bool kIsNibbleType = kType == GgmlType::kQ4_0 || kType == GgmlType::kQ4_1;
template <GgmlType kType>
constexpr bool kIsPlainType =
    kType == GgmlType::kF32 || kType == GgmlType::kF16 || kType == GgmlType::kBF16;

// Offset in its group of element i (0..7) of part `part`: Q4 parts hold the
// low and high nibbles of bytes 4·part .. 4·part + 3, i.e. elements
// 4·part + (0..3) and 16 + 4·part + (0..3); the other types hold 8·part + i.
template <GgmlType kType>
__device__ __forceinline__ int PartOffset(int part, int i) {
  if constexpr (kIsNibbleType<kType>) {
    return (i < kPart / 2 ? 0 : gguf::kQK / 2) + (kPart / 2) * part + i % (kPart / 2);
  } else {
    return kPart * part + i;
  }
}

// w[i] = element PartOffset(part, i) of group g of `row` (cols elements);
// 0 past cols (plain types only: quantized rows are whole blocks).
template <GgmlType kType>
__device__ __forceinline__ void DequantPart(const uint8_t* row, int64_t g, int part, int64_t cols,
                                            float (&w)[kPart]) {
  if constexpr (kType == GgmlType::kQ8_0) {
    const auto& b = reinterpret_cast<const gguf::BlockQ8_0*>(row)[g];
    const float d = HalfBitsToFloat(b.d);
    for (int i = 0; i < kPart; ++i) w[i] = d * static_cast<float>(b.qs[kPart * part + i]);
  } else if constexpr (kType == GgmlType::kQ4_0) {
    const auto& b = reinterpret_cast<const gguf::BlockQ4_0*>(row)[g];
    const float d = HalfBitsToFloat(b.d);
    for (int i = 0; i < kPart / 2; ++i) {
      const int q = b.qs[(kPart / 2) * part + i];
      w[i] = d * static_cast<float>((q & 0xf) - 8);
      w[i + kPart / 2] = d * static_cast<float>((q >> 4) - 8);
    }
  } else if constexpr (kType == GgmlType::kQ4_1) {
    const auto& b = reinterpret_cast<const gguf::BlockQ4_1*>(row)[g];
    const float d = HalfBitsToFloat(b.d), m = HalfBitsToFloat(b.m);
    for (int i = 0; i < kPart / 2; ++i) {
      const int q = b.qs[(kPart / 2) * part + i];
      w[i] = fmaf(d, static_cast<float>(q & 0xf), m);
      w[i + kPart / 2] = fmaf(d, static_cast<float>(q >> 4), m);
    }
  } else {
    static_assert(kIsPlainType<kType>, "DequantPart: unsupported type");
    for (int i = 0; i < kPart; ++i) {
      const int64_t e = g * kGroup + kPart * part + i;
      w[i] = e < cols ? DequantElement<kType>(row, e) : 0.0f;
    }
  }
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// y[c, r] = the warp's sum of acc[c], for c < n (lane 0 writes).
__device__ __forceinline__ void WriteSums(const float (&acc)[kMaxGemvBatch], int n, int lane,
                                          int64_t rows, int64_t r, float* __restrict__ y) {
  TANDEM_UNROLL
  for (int c = 0; c < kMaxGemvBatch; ++c) {
    if (c >= n) break;
    const float sum = WarpSum(acc[c]);
    if (lane == 0) y[c * rows + r] = sum;
  }
}

// w: [rows, row_bytes apart]; x: [n, cols]; y: [n, rows]; n <= kMaxGemvBatch.
// blockDim.x = kRowsPerBlock · 32; warp k of block b computes row
// b · kRowsPerBlock + k.
template <GgmlType kType>
__global__ void GemvKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                           int64_t row_bytes, const float* __restrict__ x, int n,
                           float* __restrict__ y) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (r >= rows) return;  // the whole warp leaves together: no shuffle is left waiting
  const uint8_t* row = w + r * row_bytes;
  const int part = lane % kPartsPerGroup;
  const int64_t num_groups = (cols + kGroup - 1) / kGroup;
  float acc[kMaxGemvBatch] = {};
  for (int64_t g = lane / kPartsPerGroup; g < num_groups; g += kGroupsPerStep) {
    float wv[kPart];
    DequantPart<kType>(row, g, part, cols, wv);
    for (int c = 0; c < kMaxGemvBatch; ++c) {
      if (c >= n) break;
      const float* xg = x + c * cols + g * kGroup;
      for (int i = 0; i < kPart; ++i) {
        const int off = PartOffset<kType>(part, i);
        if (kIsPlainType<kType> && g * kGroup + off >= cols) break;
        acc[c] = fmaf(wv[i], xg[off], acc[c]);
      }
    }
  }
  WriteSums(acc, n, lane, rows, r, y);
}

// Gemv16Kernel's unit: 8 consecutive 16-bit elements, one 16-byte load.
// Lane l takes chunks l, l + 32, ... and adds their elements in order, as
// GemvKernel's lane l takes parts 4·g + l % 4 of groups g = l / 4, l / 4 + 8,
// ...: the same elements in the same order, so both give the same bits.
constexpr int kChunk = 8;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per lane

template <GgmlType kType>
__device__ __forceinline__ float Half16ToFloat(unsigned int word, int half) {
  const auto bits = static_cast<uint16_t>(half == 0 ? word & 0xffffu : word >> 16);
  if constexpr (kType == GgmlType::kBF16) {
    return Bf16BitsToFloat(bits);
  } else {
    static_assert(kType == GgmlType::kF16, "Half16ToFloat: BF16 or F16");
    return HalfBitsToFloat(bits);
  }
}

// acc[c] += Σ_i w[i] · x[c, 8·chunk + i] for the chunk's 8 elements, in
// element order (little-endian: a word's low half is the earlier element).
template <GgmlType kType>
__device__ __forceinline__ void AccumulateChunk(uint4 packed, const float* __restrict__ x,
                                                int64_t cols, int64_t chunk, int n,
                                                float (&acc)[kMaxGemvBatch]) {
  const unsigned int words[4] = {packed.x, packed.y, packed.z, packed.w};
  float w[kChunk];
  TANDEM_UNROLL
  for (int i = 0; i < kChunk; ++i) w[i] = Half16ToFloat<kType>(words[i / 2], i % 2);
  TANDEM_UNROLL
  for (int c = 0; c < kMaxGemvBatch; ++c) {
    if (c >= n) break;
    const float4* xc = reinterpret_cast<const float4*>(x + c * cols + chunk * kChunk);
    const float4 a = xc[0], b = xc[1];
    const float xs[kChunk] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    TANDEM_UNROLL
    for (int i = 0; i < kChunk; ++i) acc[c] = fmaf(w[i], xs[i], acc[c]);
  }
}

// w rows of cols 16-bit elements (cols % 8 == 0), 16-byte aligned with
// row_bytes % 16 == 0; x 16-byte aligned. Warp k of block b computes row
// b · kRowsPerBlock + k; lane l takes chunks l, l + 32, ...
template <GgmlType kType>
__global__ void Gemv16Kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                             int64_t row_bytes, const float* __restrict__ x, int n,
                             float* __restrict__ y) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (r >= rows) return;  // the whole warp leaves together
  const uint4* row = reinterpret_cast<const uint4*>(w + r * row_bytes);
  const int64_t chunks = cols / kChunk;
  float acc[kMaxGemvBatch] = {};
  int64_t k = lane;
  for (; k + (kUnroll - 1) * kWarpSize < chunks; k += kUnroll * kWarpSize) {
    uint4 packed[kUnroll];
    TANDEM_UNROLL
    for (int u = 0; u < kUnroll; ++u) packed[u] = row[k + u * kWarpSize];
    TANDEM_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      AccumulateChunk<kType>(packed[u], x, cols, k + u * kWarpSize, n, acc);
    }
  }
  for (; k < chunks; k += kWarpSize) AccumulateChunk<kType>(row[k], x, cols, k, n, acc);
  WriteSums(acc, n, lane, rows, r, y);
}

using GemvKernelFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const float*, int,
                             float*);

// One warp per row of w, kRowsPerBlock rows per block.
absl::Status LaunchRows(GemvKernelFn kernel, const char* name, const kernels::WeightView& w,
                        const float* x, int64_t n, float* y, cudaStream_t stream) {
  const int64_t blocks = (w.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  TANDEM_LAUNCH_NAME(name);  // not "kernel" (the variable) in the emulator's counters
  TANDEM_LAUNCH_FLOPS(2.0 * static_cast<double>(n) * static_cast<double>(w.rows * w.cols));
  TANDEM_LAUNCH(kernel, static_cast<unsigned>(blocks), kRowsPerBlock * kWarpSize, 0, stream,
                static_cast<const uint8_t*>(w.data), w.rows, w.cols, w.row_bytes, x,
                static_cast<int>(n), y);
  return LaunchStatus(name);
}

// 16-bit rows that allow it take Gemv16Kernel, the rest GemvKernel.
template <GgmlType kType>
absl::Status Launch(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                    cudaStream_t stream) {
  if constexpr (kType == GgmlType::kBF16 || kType == GgmlType::kF16) {
    if (GemvVectorizes(w, x)) {
      return LaunchRows(Gemv16Kernel<kType>, "Gemv16Kernel", w, x, n, y, stream);
    }
  }
  return LaunchRows(GemvKernel<kType>, "GemvKernel", w, x, n, y, stream);
}

}  // namespace

bool GemvVectorizes(const kernels::WeightView& w, const float* x) {
  const bool half16 = w.type == GgmlType::kBF16 || w.type == GgmlType::kF16;
  return half16 && w.cols % kChunk == 0 && w.row_bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

absl::Status Gemv(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                  cudaStream_t stream) {
  RETURN_IF_ERROR(CheckDeviceWeight(w, "Gemv"));
  if (n < 0 || n > kMaxGemvBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemv: n %d outside [0, kMaxGemvBatch %d]", n, kMaxGemvBatch));
  }
  if (w.rows > kMaxGridX * kRowsPerBlock) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemv: rows %d above the limit %d", w.rows, kMaxGridX * kRowsPerBlock));
  }
  if (n == 0 || w.rows == 0) return absl::OkStatus();
  switch (w.type) {
    case GgmlType::kQ8_0:
      return Launch<GgmlType::kQ8_0>(w, x, n, y, stream);
    case GgmlType::kQ4_0:
      return Launch<GgmlType::kQ4_0>(w, x, n, y, stream);
    case GgmlType::kQ4_1:
      return Launch<GgmlType::kQ4_1>(w, x, n, y, stream);
    case GgmlType::kBF16:
      return Launch<GgmlType::kBF16>(w, x, n, y, stream);
    case GgmlType::kF16:
      return Launch<GgmlType::kF16>(w, x, n, y, stream);
    default:
      return Launch<GgmlType::kF32>(w, x, n, y, stream);
  }
}

}  // namespace tandem::cuda
