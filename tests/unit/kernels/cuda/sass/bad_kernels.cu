// Deliberately bad kernels for scripts/sass_gates.py's test: each breaks one
// gate under a name the gates know. Compiled by nvcc for sm_90 in the test
// only; not part of any library.
#include <cstdint>

namespace tandem::cuda::sass_gates_test {

// Strided 4-byte loads (no 128-bit load) and a dynamically indexed local
// array (stack memory): breaks "ldg128" and "stack".
template <typename T>
__global__ void Gemv16Kernel(const T* w, int64_t stride, int pick, float* out) {
  float acc[64];
  for (int i = 0; i < 64; ++i) acc[i] = static_cast<float>(w[(threadIdx.x + i * 32) * stride]);
  out[threadIdx.x] = acc[pick & 63];
}
template __global__ void Gemv16Kernel<float>(const float*, int64_t, int, float*);

// Four 64-bit divisions by run-time divisors: breaks "div64" (budget 2).
template <typename T>
__global__ void DecodePartitionKernel(const int64_t* positions, int64_t block_size, T* out) {
  const int64_t p = positions[threadIdx.x];
  const int64_t q = p / block_size + (p * 7) / (block_size + 3);
  out[threadIdx.x] = static_cast<T>(q + (q * 5) / (block_size + 9) + (q * 3) / (p + 11));
}
template __global__ void DecodePartitionKernel<float>(const int64_t*, int64_t, float*);

}  // namespace tandem::cuda::sass_gates_test
