// GemmLibrary under TANDEM_CUDA_EMULATION: no cuBLAS exists, so the CPU
// kernels::MatMul stands in for it, reading and writing the emulated device
// memory directly (it is host memory). The one place the emulated build
// substitutes a library.
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/graph.h"
#include "kernels/cuda/emulation/runtime_api.h"
#include "kernels/cuda/gemm/gemm_library.h"
#include "kernels/cuda/gemm/gemm_operands.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/ggml_type.h"

#ifndef TANDEM_CUDA_EMULATION
#error "gemm_emulated.cc belongs to the emulated build; real GPUs use gemm_cublas.cc"
#endif

namespace tandem::cuda {
namespace {

// Counts what gemm_cublas.cc's calls for `w` would move (counters.h):
// F32 weights: one cublasSgemm; BF16: one cublasGemmEx on bf16 operands
// (the activations' rounding is a kernel that runs here too); the 4- and
// 8-bit types and F16: a dequantization of the whole weight to f32
// (DequantizeWeight, not run here: MatMul reads the blocks itself), then
// cublasSgemm on it.
void CountAsCublas(const kernels::WeightView& w, int64_t n) {
  namespace counters = cuda_emu::counters_internal;
  if (!cuda_emu::CountersEnabled()) return;
  const std::string shape = absl::StrFormat(" [%d x %d]", w.rows, w.cols);
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(w.rows * w.cols);
  const int64_t out_bytes = n * w.rows * int64_t{sizeof(float)};
  const int64_t dense_f32 = w.rows * w.cols * int64_t{sizeof(float)};
  switch (w.type) {
    case gguf::GgmlType::kF32:
      counters::OnLibraryGemm("cublasSgemm" + shape, flops, w.rows * w.row_bytes + n * w.cols * 4,
                              out_bytes);
      return;
    case gguf::GgmlType::kBF16:
      counters::OnLibraryGemm("cublasGemmEx(bf16)" + shape, flops,
                              w.rows * w.row_bytes + n * w.cols * 2, out_bytes);
      return;
    default:
      counters::OnLibraryGemm("DequantizeWeight (counted, not run)" + shape, 0,
                              w.rows * w.row_bytes, dense_f32);
      counters::OnLibraryGemm("cublasSgemm" + shape, flops, dense_f32 + n * w.cols * 4,
                              out_bytes);
      return;
  }
}

class EmulatedGemmLibrary final : public GemmLibrary {
 public:
  EmulatedGemmLibrary(cudaStream_t stream, ThreadPool* pool) : stream_(stream), pool_(pool) {}

  absl::Status Multiply(const kernels::WeightView& w, const float* x, int64_t n, float* y,
                        float* workspace) override {
    const float* input = x;
    if (w.type == gguf::GgmlType::kBF16) {
      // The real path's rounding kernel, widened back to f32 for the CPU.
      RETURN_IF_ERROR(RoundToBf16(x, n * w.cols, workspace, stream_));
      input = workspace;
    }
    kernels::WeightView host_view = w;
    host_view.packed = nullptr;  // Gemm's contract: w.packed is not read
    ThreadPool* pool = pool_;
    auto multiply = [host_view, input, n, y, pool] {
      CountAsCublas(host_view, n);
      kernels::MatMul(host_view, input, n, y,
                      {.isa = kernels::BestIsa(), .quantize_activations = false}, pool);
      return cudaSuccess;
    };
    // Captured into a graph as cuBLAS's kernels are on a GPU: the product
    // runs at each replay, on what x holds then.
    if (cuda_emu::RecordIfCapturing(stream_, multiply)) return absl::OkStatus();
    // The CPU reads x, w and y as soon as it is called, so the stream's
    // earlier work must be complete: under emulation every launch and copy
    // has run to completion when its call returns (runtime_api.h). Not a
    // cudaStreamSynchronize, which would count as a host sync that cuBLAS
    // does not make (counters.h).
    if (!cuda_emu::IsValidStream(stream_)) {
      return CudaStatus(cudaErrorInvalidResourceHandle, "Gemm: the stream");
    }
    multiply();
    return absl::OkStatus();
  }

 private:
  cudaStream_t stream_;
  ThreadPool* pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GemmLibrary>> CreateGemmLibrary(cudaStream_t stream,
                                                               ThreadPool* pool) {
  return std::make_unique<EmulatedGemmLibrary>(stream, pool);
}

}  // namespace tandem::cuda
