// The absl::Status of a kernel launch: the host API of every kernel in
// kernels/cuda returns absl::Status, and CUDA reports a bad launch through
// the calling thread's last error.
#ifndef TANDEM_KERNELS_CUDA_LAUNCH_STATUS_CUH_
#define TANDEM_KERNELS_CUDA_LAUNCH_STATUS_CUH_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_compat.cuh"

namespace tandem::cuda {

// Takes (and clears) the last CUDA error after launching `kernel`: OK when
// there was none, INTERNAL naming the kernel and the CUDA error otherwise.
inline absl::Status LaunchStatus(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("launching ", kernel,
                                          " failed: ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_LAUNCH_STATUS_CUH_
