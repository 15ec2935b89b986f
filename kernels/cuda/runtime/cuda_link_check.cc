// Links the nvcc-built kernels into a host program (built, never run in CI:
// there is no GPU). On a GPU machine it sums 1..4096 and prints the result.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "kernels/cuda/runtime/sample_reduction.cuh"

int main() {
  constexpr int kN = 4096;
  std::vector<float> host(kN);
  for (int i = 0; i < kN; ++i) host[i] = static_cast<float>(i + 1);
  float* in = nullptr;
  float* sums = nullptr;
  if (cudaMalloc(&in, kN * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&sums, sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaMemcpy(in, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  cudaError_t error = tandem::cuda::LaunchBlockSum(in, sums, kN, 1, 256, nullptr);
  float sum = 0.0f;
  if (error == cudaSuccess) error = cudaMemcpy(&sum, sums, sizeof(float), cudaMemcpyDeviceToHost);
  std::printf("sum %.1f (expected %.1f): %s\n", sum, kN * (kN + 1) / 2.0,
              cudaGetErrorString(error));
  return error == cudaSuccess ? 0 : 1;
}
