// Rope: one block per token. The token's cos/sin table (rope_dim / 2 pairs)
// is computed once into shared memory, then the block's threads rotate the
// num_heads · rope_dim / 2 pairs of the token, striding over them.
#include "kernels/cuda/layers/rope.cuh"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
// The launch's default dynamic shared memory limit.
constexpr int64_t kMaxSharedBytes = 48 * 1024;

// x: [gridDim.x, num_heads, head_dim]; positions: [gridDim.x]; pairs =
// rope_dim / 2; dynamic shared memory: 2 · pairs floats.
__global__ void RopeKernel(float* __restrict__ x, const int32_t* __restrict__ positions,
                           int num_heads, int head_dim, int pairs, float theta_scale) {
  TANDEM_DYNAMIC_SHARED(float, cos_sin);  // [pairs, 2]: cos, sin of pair i's angle
  const int64_t t = blockIdx.x;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    // theta_i = pos · s^i by the reference's recurrence, one rounding per
    // step, so the angle has the reference's bits.
    float theta = static_cast<float>(positions[t]);
    for (int k = 0; k < i; ++k) theta = __fmul_rn(theta, theta_scale);
    cos_sin[2 * i] = cosf(theta);
    cos_sin[2 * i + 1] = sinf(theta);
  }
  __syncthreads();
  float* token = x + t * num_heads * head_dim;
  for (int p = threadIdx.x; p < num_heads * pairs; p += blockDim.x) {
    const int h = p / pairs, i = p % pairs;
    float* v = token + static_cast<int64_t>(h) * head_dim + 2 * i;
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float x0 = v[0], x1 = v[1];
    // Unfused, as the reference computes x0·c - x1·s and x0·s + x1·c.
    v[0] = __fadd_rn(__fmul_rn(x0, c), -__fmul_rn(x1, s));
    v[1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

absl::Status CheckParams(const RopeParams& p) {
  if (p.rope_dim < 2 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Rope: rope_dim %d must be even and in [2, head_dim %d]", p.rope_dim, p.head_dim));
  }
  if (p.rope_dim * static_cast<int64_t>(sizeof(float)) > kMaxSharedBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Rope: rope_dim %d needs more than %d bytes of shared memory", p.rope_dim,
                        kMaxSharedBytes));
  }
  if (p.num_heads < 1 || p.num_heads * p.head_dim > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Rope: num_heads %d with head_dim %d outside [1, %d] elements per token",
                        p.num_heads, p.head_dim, kMaxGridX));
  }
  if (!(p.freq_base > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat("Rope: freq_base %g <= 0", p.freq_base));
  }
  if (p.num_tokens < 0 || p.num_tokens > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Rope: num_tokens %d outside [0, %d]", p.num_tokens, kMaxGridX));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Rope(float* x, const int32_t* positions, const RopeParams& params,
                  cudaStream_t stream) {
  if (absl::Status status = CheckParams(params); !status.ok()) return status;
  if (params.num_tokens == 0) return absl::OkStatus();
  // Computed on the host exactly as kernels::Rope does (powf), so the
  // recurrence starts from the same ratio.
  const float theta_scale = std::pow(params.freq_base, -2.0f / static_cast<float>(params.rope_dim));
  const int pairs = static_cast<int>(params.rope_dim / 2);
  const int64_t work = params.num_heads * pairs;
  const int threads = static_cast<int>(
      std::min<int64_t>(kMaxThreads, (work + kWarpSize - 1) / kWarpSize * kWarpSize));
  TANDEM_LAUNCH(RopeKernel, static_cast<unsigned>(params.num_tokens), threads,
                2 * pairs * sizeof(float), stream, x, positions, static_cast<int>(params.num_heads),
                static_cast<int>(params.head_dim), pairs, theta_scale);
  return LaunchStatus("RopeKernel");
}

}  // namespace tandem::cuda
