// Gemm's build-independent half: limits, workspace and argument checks. The
// multiplication itself is GemmLibrary's (gemm_cublas.cc or
// gemm_emulated.cc, whichever this library is built with).
#include "kernels/cuda/gemm/gemm.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/gemm/gemm_library.h"
#include "kernels/cuda/primitives/weight_check.h"
#include "kernels/ggml_type.h"

namespace tandem::cuda {
namespace {

using gguf::GgmlType;

// cuBLAS takes sizes and leading dimensions as int.
constexpr int64_t kMaxCublasInt = std::numeric_limits<int32_t>::max();
// The most floats whose byte count fits int64.
constexpr int64_t kMaxWorkspaceElements =
    std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(float));

// The weight types Gemm dequantizes to f32 in the workspace before the
// library call (the others, F32 and BF16, are library input types).
bool IsDequantizedType(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 ||
         type == GgmlType::kF16;
}

absl::Status CheckLimits(const GemmLimits& limits) {
  if (limits.max_rows < 0 || limits.max_rows > kMaxCublasInt) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: max_rows %d outside [0, %d]", limits.max_rows, kMaxCublasInt));
  }
  if (limits.max_cols < 0 || limits.max_cols > kMaxCublasInt) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: max_cols %d outside [0, %d]", limits.max_cols, kMaxCublasInt));
  }
  if (limits.max_weight_elements < 0 || limits.max_weight_elements > kMaxWorkspaceElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: max_weight_elements %d outside [0, %d]", limits.max_weight_elements,
                        kMaxWorkspaceElements));
  }
  // Both factors are below 2^31, so the product fits int64.
  if (limits.max_rows * limits.max_cols > kMaxWorkspaceElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Gemm: max_rows %d · max_cols %d = %d activation elements, above the workspace limit %d",
        limits.max_rows, limits.max_cols, limits.max_rows * limits.max_cols,
        kMaxWorkspaceElements));
  }
  return absl::OkStatus();
}

// The checks of Run beyond CheckDeviceWeight's, against `limits` and
// cuBLAS's int sizes.
absl::Status CheckShape(const kernels::WeightView& w, int64_t n, const GemmLimits& limits) {
  if (n < 0 || n > limits.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: n %d outside [0, max_rows %d]", n, limits.max_rows));
  }
  if (w.cols > limits.max_cols) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: weight cols %d above max_cols %d", w.cols, limits.max_cols));
  }
  if (w.rows > kMaxCublasInt) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: weight rows %d above the limit %d", w.rows, kMaxCublasInt));
  }
  if (IsDequantizedType(w.type)) {
    // rows and cols are below 2^31 (above): the product fits int64.
    if (w.rows * w.cols > limits.max_weight_elements) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Gemm: %s weight of %d x %d = %d elements above max_weight_elements %d",
          gguf::TypeName(w.type), w.rows, w.cols, w.rows * w.cols, limits.max_weight_elements));
    }
    return absl::OkStatus();
  }
  // F32 and BF16 weights are read in place: their row stride is cuBLAS's lda.
  const int64_t stride = w.row_bytes / kernels::WeightBlockBytes(w.type);
  if (stride > kMaxCublasInt) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Gemm: row stride %d elements (row_bytes %d) above the limit %d", stride,
                        w.row_bytes, kMaxCublasInt));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t GemmWorkspaceElements(const GemmLimits& limits) {
  return std::max(limits.max_rows * limits.max_cols, limits.max_weight_elements);
}

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::Create(const GemmLimits& limits, cudaStream_t stream,
                                                   ThreadPool* pool) {
  RETURN_IF_ERROR(CheckLimits(limits));
  ASSIGN_OR_RETURN(
      DeviceBuffer workspace,
      DeviceBuffer::Allocate(GemmWorkspaceElements(limits) * sizeof(float), "the Gemm workspace"));
  ASSIGN_OR_RETURN(std::unique_ptr<GemmLibrary> library, CreateGemmLibrary(stream, pool));
  return std::unique_ptr<Gemm>(new Gemm(limits, std::move(workspace), std::move(library)));
}

Gemm::Gemm(const GemmLimits& limits, DeviceBuffer workspace, std::unique_ptr<GemmLibrary> library)
    : limits_(limits), workspace_(std::move(workspace)), library_(std::move(library)) {}

Gemm::~Gemm() = default;

absl::Status Gemm::Run(const kernels::WeightView& w, const float* x, int64_t n, float* y) {
  RETURN_IF_ERROR(CheckDeviceWeight(w, "Gemm"));
  RETURN_IF_ERROR(CheckShape(w, n, limits_));
  if (n == 0 || w.rows == 0) return absl::OkStatus();
  return library_->Multiply(w, x, n, y, workspace_.as<float>());
}

}  // namespace tandem::cuda
