// Links the nvcc-built kernels of TANDEM_CUDA_KERNELS_A (embedding, RMSNorm,
// RoPE, SiLU·up, GEMV, KV cache) into a host program that calls each host
// API once on a small zeroed input. Built, never run in CI (there is no
// GPU): it proves the host-callable headers compile without nvcc and that
// the library's objects and dependencies link. On a GPU it prints each
// call's status and exits 1 if any failed.
#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "kernels/cuda/attention/kv_cache.cuh"
#include "kernels/cuda/gemm/gemv.cuh"
#include "kernels/cuda/layers/embedding.cuh"
#include "kernels/cuda/layers/rms_norm.cuh"
#include "kernels/cuda/layers/rope.cuh"
#include "kernels/cuda/layers/silu_mul.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace {

bool Report(const char* name, const absl::Status& status) {
  std::printf("%-16s %s\n", name, status.ToString().c_str());
  return status.ok();
}

}  // namespace

int main() {
  using tandem::gguf::GgmlType;
  namespace cuda = tandem::cuda;
  namespace kernels = tandem::kernels;
  constexpr int64_t kDim = 64;
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, 1 << 20) != cudaSuccess ||
      cudaMemset(buffer, 0, 1 << 20) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  // Disjoint 64 KiB regions of one zeroed allocation.
  auto region = [&](int i) { return static_cast<char*>(buffer) + i * 65536; };
  float* a = reinterpret_cast<float*>(region(0));
  float* b = reinterpret_cast<float*>(region(1));
  float* c = reinterpret_cast<float*>(region(2));
  auto* ids = reinterpret_cast<int32_t*>(region(3));
  auto* slots = reinterpret_cast<int64_t*>(region(4));
  const kernels::WeightView w{GgmlType::kQ8_0, region(5), 4, kDim, kDim / 32 * 34};
  const kernels::PagedKvView kv{region(6), region(7), kernels::KvDtype::kF16, 4, 16, 1, kDim};
  bool ok = Report("EmbeddingGather", cuda::EmbeddingGather(w, ids, 2, a, nullptr));
  ok &= Report("AddRmsNorm", cuda::AddRmsNorm(a, b, b, c, {2, kDim, 1e-5f}, nullptr));
  ok &= Report("Rope", cuda::Rope(a, ids, {2, 1, kDim, kDim, 10000.0f}, nullptr));
  ok &= Report("SiluMul", cuda::SiluMul(a, b, 2 * kDim, nullptr));
  ok &= Report("Gemv", cuda::Gemv(w, a, 2, c, nullptr));
  ok &= Report("WriteKv", cuda::WriteKv(kv, a, b, slots, 2, nullptr));
  ok &= Report("CopyKvBlocks", cuda::CopyKvBlocks(kv, ids, ids + 1, 1, nullptr));
  ok &= Report("synchronize", tandem::cuda::CudaStatus(cudaDeviceSynchronize(), "sync"));
  cudaFree(buffer);
  return ok ? 0 : 1;
}
