// DeviceWeights: a Model's weights copied to device memory once at load, in
// the layout the CUDA kernels read (kernels::WeightView with data in device
// memory, rows contiguous). Matrices are converted as CudaWeights says;
// norm vectors stay f32.
//
// Thread-safety: immutable after UploadWeights.
#ifndef TANDEM_ENGINE_DEVICE_DEVICE_WEIGHTS_H_
#define TANDEM_ENGINE_DEVICE_DEVICE_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/device/device_options.h"
#include "engine/model/model_weights.h"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/kernels.h"

namespace tandem::device {

struct DeviceMatrix {
  cuda::DeviceBuffer buffer;
  kernels::WeightView view;  // view.data points into `buffer` (or another matrix's)
};

struct DeviceLayer {
  cuda::DeviceBuffer attn_norm;  // [hidden] f32
  cuda::DeviceBuffer ffn_norm;   // [hidden] f32
  DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct DeviceWeights {
  DeviceMatrix token_embd;
  std::vector<DeviceLayer> layers;
  cuda::DeviceBuffer output_norm;  // [hidden] f32
  // The output head; with a tied head in the same form as the embedding it
  // shares the embedding's buffer (its own `buffer` is empty).
  DeviceMatrix output;
  int64_t total_bytes = 0;
  // The largest rows * cols of the layer matrices kept quantized (what a
  // prefill GEMM dequantizes at once); 0 when none is.
  int64_t max_quantized_layer_elements = 0;
};

// The type a matrix of `type` gets on the device under `mode`: BF16 for
// kBf16; for kNative the type itself where the GEMV and GEMM kernels read it
// (Q8_0, Q4_0, Q4_1, F16, BF16, F32), else F32.
gguf::GgmlType DeviceTypeOf(gguf::GgmlType type, CudaWeights mode);

// Uploads every matrix and norm of `weights` (views of the GGUF, not
// dequantized) on `stream` and waits for the copies. ResourceExhausted
// (naming the tensor) when device memory runs out; InvalidArgument for a
// tensor type tandem cannot dequantize.
absl::StatusOr<DeviceWeights> UploadWeights(const model::ModelWeights& weights, CudaWeights mode,
                                            cudaStream_t stream);

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DEVICE_WEIGHTS_H_
