// Which device runs a model, and the CUDA backend's settings: what the
// --device, --cuda-weights, --gpu-memory-fraction and --max-batched-tokens
// flags of tandem run, tandem-worker and tandem-draft select.
#ifndef TANDEM_ENGINE_DEVICE_DEVICE_OPTIONS_H_
#define TANDEM_ENGINE_DEVICE_DEVICE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::device {

enum class Device { kCpu, kCuda };

// How weight matrices live on the GPU.
enum class CudaWeights {
  // Dequantized to bf16 at upload: tensor-core GEMMs, activations rounded to
  // bf16 inside each GEMM; 2 bytes per parameter.
  kBf16,
  // As stored in the GGUF where the kernels read the type (Q8_0, Q4_0, Q4_1,
  // F16, BF16, F32), else dequantized to f32: decode GEMVs dequantize in
  // registers with f32 activations, prefill GEMMs dequantize a matrix at a
  // time to f32. Reference-precision math up to summation order.
  kNative,
};

struct CudaOptions {
  CudaWeights weights = CudaWeights::kBf16;
  // Share of the device's total memory this process may fill (weights,
  // scratch and the KV cache), as vLLM's gpu_memory_utilization. In (0, 1].
  double gpu_memory_fraction = 0.9;
  // Most tokens in one forward (prefill chunks and decode tokens together):
  // every scratch buffer is sized for it at load, so steps allocate nothing.
  int32_t max_batched_tokens = 2048;
  // Device ordinals of this node's ranks, by local rank (--gpus 0,1); empty
  // → local rank r uses device r.
  std::vector<int> gpus;
  // The target's tokens are sampled on the GPU (DeviceSampler), only the
  // tokens and logprobs coming back; false copies every logits row to the
  // host and samples there (--cuda-sampling host).
  bool sample_on_device = true;
  // Decode steps run as CUDA graphs (decode_graphs.h), captured per batch
  // shape; false launches every kernel each step (--nocuda-graphs).
  bool cuda_graphs = true;
};

// The most tokens one forward may be sized for: 2^20.
inline constexpr int32_t kMaxBatchedTokensLimit = 1 << 20;

// "cpu" or "cuda"; InvalidArgument naming `flag` and the value otherwise.
absl::StatusOr<Device> ParseDevice(std::string_view flag, std::string_view value);
// "0,1,3" → {0, 1, 3}; "" → {}. InvalidArgument naming the item that is not
// an ordinal in [0, 1023] or repeats.
absl::StatusOr<std::vector<int>> ParseGpus(std::string_view value);
// "bf16" or "native"; InvalidArgument naming the value otherwise.
absl::StatusOr<CudaWeights> ParseCudaWeights(std::string_view value);
const char* CudaWeightsName(CudaWeights weights);
// InvalidArgument naming the flag, the value and the range for a fraction
// outside (0, 1] or max_batched_tokens outside [1, kMaxBatchedTokensLimit].
absl::Status ValidateCudaOptions(const CudaOptions& options);

// The device flags of a binary, parsed and validated.
struct DeviceFlags {
  std::string device = "cpu";        // --device
  std::string cuda_weights = "bf16";  // --cuda-weights
  double gpu_memory_fraction = 0.9;  // --gpu-memory-fraction
  int32_t max_batched_tokens = 2048;  // --max-batched-tokens (device scratch)
  std::string gpus;                  // --gpus: comma-separated ordinals, "" = by local rank
  std::string cuda_sampling = "device";  // --cuda-sampling: device or host
  bool cuda_graphs = true;               // --cuda-graphs
};
struct DeviceChoice {
  Device device = Device::kCpu;
  CudaOptions cuda;
};
// Fails as ParseDevice, ParseCudaWeights and, for Device::kCuda,
// ValidateCudaOptions.
absl::StatusOr<DeviceChoice> ParseDeviceFlags(const DeviceFlags& flags);

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DEVICE_OPTIONS_H_
