// GemmLibrary: the half of Gemm (gemm.h) that multiplies, one implementation
// per build: cuBLAS on real GPUs (gemm_cublas.cc) or, under
// TANDEM_CUDA_EMULATION, the CPU matmul (gemm_emulated.cc). Gemm checks the
// arguments and owns the workspace; the library owns the library state
// (cuBLAS handle) bound to one stream.
//
// Thread-safety: as Gemm's, one host thread at a time.
#ifndef TANDEM_KERNELS_CUDA_GEMM_GEMM_LIBRARY_H_
#define TANDEM_KERNELS_CUDA_GEMM_GEMM_LIBRARY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/kernels.h"

namespace tandem::cuda {

class GemmLibrary {
 public:
  virtual ~GemmLibrary() = default;

  // y[n, w.rows] = x[n, w.cols] · wᵀ as Gemm::Run documents, enqueued on the
  // library's stream, for arguments Gemm::Run has checked, with n > 0 and
  // w.rows > 0. `workspace`: device memory of at least n · w.cols floats
  // (BF16 w) or w.rows · w.cols floats (Q8_0, Q4_0, Q4_1, F16 w), which the
  // call may overwrite. INTERNAL for a failed launch or library call.
  virtual absl::Status Multiply(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                                float* workspace) = 0;
};

// The library of this build, working on `stream`; `pool` (not owned, may be
// null) is used only under emulation. INTERNAL or RESOURCE_EXHAUSTED when
// cuBLAS cannot start or its workspace cannot be allocated.
absl::StatusOr<std::unique_ptr<GemmLibrary>> CreateGemmLibrary(cudaStream_t stream,
                                                               ThreadPool* pool);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_GEMM_GEMM_LIBRARY_H_
