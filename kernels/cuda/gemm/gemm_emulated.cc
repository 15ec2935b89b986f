// GemmLibrary under TANDEM_CUDA_EMULATION: no cuBLAS exists, so the CPU
// kernels::MatMul stands in for it, reading and writing the emulated device
// memory directly (it is host memory). The one place the emulated build
// substitutes a library.
#include <memory>

#include "common/status_macros.h"
#include "kernels/cuda/emulation/graph.h"
#include "kernels/cuda/gemm/gemm_library.h"
#include "kernels/cuda/gemm/gemm_operands.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/ggml_type.h"

#ifndef TANDEM_CUDA_EMULATION
#error "gemm_emulated.cc belongs to the emulated build; real GPUs use gemm_cublas.cc"
#endif

namespace tandem::cuda {
namespace {

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
      kernels::MatMul(host_view, input, n, y,
                      {.isa = kernels::BestIsa(), .quantize_activations = false}, pool);
      return cudaSuccess;
    };
    // Captured into a graph as cuBLAS's kernels are on a GPU: the product
    // runs at each replay, on what x holds then.
    if (cuda_emu::RecordIfCapturing(stream_, multiply)) return absl::OkStatus();
    // The CPU reads x, w and y as soon as it is called, so the stream's
    // earlier work must be complete. Under emulation every launch and copy
    // has run to completion when its call returns (runtime_api.h), so this
    // synchronization has nothing to wait for; it states the requirement
    // and reports an invalid stream.
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "Gemm: cudaStreamSynchronize"));
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
