// GemmLibrary on real GPUs: cuBLAS. Compiled by the host compiler with the
// CUDA include directories; the operand conversions it launches are nvcc's
// (gemm_operands.cu).
//
// Row-major to cuBLAS's column-major: a row-major [r, c] matrix with rows
// `ld` apart is a column-major c × r matrix with leading dimension ld. So
// y[n, rows] = x[n, cols] · wᵀ is C = op(A) · B with C = y as rows × n
// (ldc = rows), A = w as cols × rows (lda = w's row stride) transposed, and
// B = x as cols × n (ldb = cols).
#include <cublas_v2.h>

#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/gemm/gemm_library.h"
#include "kernels/cuda/gemm/gemm_operands.cuh"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/ggml_type.h"

#ifdef TANDEM_CUDA_EMULATION
#error "gemm_cublas.cc needs cuBLAS; the emulated build uses gemm_emulated.cc"
#endif

namespace tandem::cuda {
namespace {

// cuBLAS's recommended workspace for Hopper (4 MiB suffices before it).
// Given explicitly, through DeviceBuffer, so that it is counted and fixed
// at creation instead of drawn from cuBLAS's own pool.
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

absl::Status CublasStatus(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("Gemm: %s: %s (%s)", what, cublasGetStatusName(status),
                                             cublasGetStatusString(status)));
}

class CublasGemmLibrary final : public GemmLibrary {
 public:
  // Owns `handle` (destroys it) and `library_workspace`.
  CublasGemmLibrary(cublasHandle_t handle, DeviceBuffer library_workspace, cudaStream_t stream)
      : handle_(handle), library_workspace_(std::move(library_workspace)), stream_(stream) {}
  ~CublasGemmLibrary() override { cublasDestroy(handle_); }

  // Binds the handle to the stream and the workspace and sets the math mode.
  absl::Status Configure();

  absl::Status Multiply(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                        float* workspace) override;

 private:
  // y[n, rows] = x[n, cols] · wᵀ for f32 w [rows, cols] with rows `ld`
  // floats apart.
  absl::Status Sgemm(const float* w, int64_t ld, int64_t rows, int64_t cols, const float* x,
                     int64_t n, float* y);
  // The same for a BF16 w and bf16 x, fp32 accumulation and output.
  absl::Status Bf16Gemm(const kernels::WeightView& w, const __nv_bfloat16* x, int64_t n, float* y);

  cublasHandle_t handle_;
  DeviceBuffer library_workspace_;
  cudaStream_t stream_;
};

absl::Status CublasGemmLibrary::Configure() {
  RETURN_IF_ERROR(CublasStatus(cublasSetStream(handle_, stream_), "cublasSetStream"));
  // After cublasSetStream, which resets the workspace to cuBLAS's own pool.
  RETURN_IF_ERROR(CublasStatus(cublasSetWorkspace(handle_, library_workspace_.data(),
                                                  static_cast<size_t>(library_workspace_.bytes())),
                               "cublasSetWorkspace"));
  // CUBLAS_DEFAULT_MATH, stated rather than inherited: f32 operands stay f32
  // (TF32 rounding would need CUBLAS_TF32_TENSOR_OP_MATH), which the
  // reference-precision contract requires, while bf16 operands may use
  // tensor cores, which accumulate in fp32 under CUBLAS_COMPUTE_32F.
  // CUBLAS_PEDANTIC_MATH would forbid those too, costing speed for nothing
  // the contract asks.
  return CublasStatus(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

absl::Status CublasGemmLibrary::Multiply(const kernels::WeightView& w, const float* x, int64_t n,
                                         float* y, float* workspace) {
  switch (w.type) {
    case gguf::GgmlType::kF32:
      return Sgemm(static_cast<const float*>(w.data), w.row_bytes / int64_t{sizeof(float)}, w.rows,
                   w.cols, x, n, y);
    case gguf::GgmlType::kBF16: {
      auto* x_bf16 = reinterpret_cast<__nv_bfloat16*>(workspace);
      RETURN_IF_ERROR(RoundToBf16(x, n * w.cols, x_bf16, stream_));
      return Bf16Gemm(w, x_bf16, n, y);
    }
    default:  // Q8_0, Q4_0, Q4_1, F16: dequantized to a dense [rows, cols]
      RETURN_IF_ERROR(DequantizeWeight(w, workspace, stream_));
      return Sgemm(workspace, w.cols, w.rows, w.cols, x, n, y);
  }
}

absl::Status CublasGemmLibrary::Sgemm(const float* w, int64_t ld, int64_t rows, int64_t cols,
                                      const float* x, int64_t n, float* y) {
  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: y is not read
  return CublasStatus(
      cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                  static_cast<int>(cols), &alpha, w, static_cast<int>(ld), x,
                  static_cast<int>(cols), &beta, y, static_cast<int>(rows)),
      "cublasSgemm");
}

absl::Status CublasGemmLibrary::Bf16Gemm(const kernels::WeightView& w, const __nv_bfloat16* x,
                                         int64_t n, float* y) {
  const float alpha = 1.0f, beta = 0.0f;
  const int ld = static_cast<int>(w.row_bytes / int64_t{sizeof(__nv_bfloat16)});
  return CublasStatus(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(n),
                   static_cast<int>(w.cols), &alpha, w.data, CUDA_R_16BF, ld, x, CUDA_R_16BF,
                   static_cast<int>(w.cols), &beta, y, CUDA_R_32F, static_cast<int>(w.rows),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace

absl::StatusOr<std::unique_ptr<GemmLibrary>> CreateGemmLibrary(cudaStream_t stream,
                                                               ThreadPool* pool) {
  ASSIGN_OR_RETURN(DeviceBuffer library_workspace,
                   DeviceBuffer::Allocate(kCublasWorkspaceBytes, "the cuBLAS workspace"));
  cublasHandle_t handle = nullptr;
  RETURN_IF_ERROR(CublasStatus(cublasCreate(&handle), "cublasCreate"));
  auto library = std::make_unique<CublasGemmLibrary>(handle, std::move(library_workspace), stream);
  RETURN_IF_ERROR(library->Configure());
  return std::unique_ptr<GemmLibrary>(std::move(library));
}

}  // namespace tandem::cuda
