// Links Gemm's cuBLAS build (gemm_cublas.cc, gemm_operands.cu, cuBLAS) into
// a host program that runs one product per path (F32, BF16, Q8_0) on zeroed
// inputs. Built, never run in CI (there is no GPU): it proves that the
// cuBLAS symbols resolve. On a GPU it prints each call's status and the
// largest |y| (0 expected) and exits 1 if anything failed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/gemm/gemm.h"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/cuda/runtime/device_buffer.h"

namespace {

bool Report(const char* name, const absl::Status& status) {
  std::printf("%-12s %s\n", name, status.ToString().c_str());
  return status.ok();
}

}  // namespace

int main() {
  using tandem::gguf::GgmlType;
  namespace cuda = tandem::cuda;
  namespace kernels = tandem::kernels;
  constexpr int64_t kRows = 64, kCols = 64, kN = 4;
  constexpr int64_t kBytes = 1 << 16;
  absl::StatusOr<cuda::DeviceBuffer> buffer = cuda::DeviceBuffer::Allocate(4 * kBytes, "inputs");
  if (!Report("Allocate", buffer.status())) return 1;
  if (!Report("memset", cuda::CudaStatus(cudaMemset(buffer->data(), 0, 4 * kBytes), "memset"))) {
    return 1;
  }
  auto region = [&](int i) { return buffer->as<char>() + i * kBytes; };
  const float* x = reinterpret_cast<const float*>(region(0));
  float* y = reinterpret_cast<float*>(region(1));
  absl::StatusOr<std::unique_ptr<cuda::Gemm>> gemm =
      cuda::Gemm::Create({kN, kCols, kRows * kCols}, nullptr, nullptr);
  if (!Report("Create", gemm.status())) return 1;
  const kernels::WeightView f32{GgmlType::kF32, region(2), kRows, kCols, kCols * 4};
  const kernels::WeightView bf16{GgmlType::kBF16, region(2), kRows, kCols, kCols * 2};
  const kernels::WeightView q8_0{GgmlType::kQ8_0, region(3), kRows, kCols, kCols / 32 * 34};
  bool ok = Report("F32", (*gemm)->Run(f32, x, kN, y));
  ok &= Report("BF16", (*gemm)->Run(bf16, x, kN, y));
  ok &= Report("Q8_0", (*gemm)->Run(q8_0, x, kN, y));
  std::vector<float> host(kN * kRows);
  ok &= Report("download", cuda::CudaStatus(cudaMemcpy(host.data(), y, host.size() * sizeof(float),
                                                       cudaMemcpyDeviceToHost),
                                            "download"));
  float max_abs = 0;
  for (float v : host) max_abs = std::max(max_abs, std::fabs(v));
  std::printf("max |y| %g (expected 0)\n", max_abs);
  return ok && max_abs == 0 ? 0 : 1;
}
