#include "engine/device/device_options.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tandem::device {

absl::StatusOr<Device> ParseDevice(std::string_view flag, std::string_view value) {
  if (value == "cpu") return Device::kCpu;
  if (value == "cuda") return Device::kCuda;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s '%s' is not a device: must be cpu or cuda", flag, value));
}

absl::StatusOr<std::vector<int>> ParseGpus(std::string_view value) {
  std::vector<int> gpus;
  const std::string list(value);  // Debian's Abseil has its own string_view
  if (list.empty()) return gpus;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int ordinal = 0;
    if (!absl::SimpleAtoi(item, &ordinal) || ordinal < 0 || ordinal > 1023) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--gpus '%s': '%s' is not a device ordinal in [0, 1023]", list, std::string(item)));
    }
    if (std::find(gpus.begin(), gpus.end(), ordinal) != gpus.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--gpus '%s' lists device %d twice", list, ordinal));
    }
    gpus.push_back(ordinal);
  }
  return gpus;
}

absl::StatusOr<CudaWeights> ParseCudaWeights(std::string_view value) {
  if (value == "bf16") return CudaWeights::kBf16;
  if (value == "native") return CudaWeights::kNative;
  return absl::InvalidArgumentError(
      absl::StrFormat("--cuda-weights '%s' must be bf16 or native", value));
}

const char* CudaWeightsName(CudaWeights weights) {
  return weights == CudaWeights::kBf16 ? "bf16" : "native";
}

absl::Status ValidateCudaOptions(const CudaOptions& options) {
  if (!(options.gpu_memory_fraction > 0.0 && options.gpu_memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpu-memory-fraction %g is out of range: must be in (0, 1]",
        options.gpu_memory_fraction));
  }
  if (options.max_batched_tokens < 1 || options.max_batched_tokens > kMaxBatchedTokensLimit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-batched-tokens %d is out of range: must be in [1, %d]", options.max_batched_tokens,
        kMaxBatchedTokensLimit));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceChoice> ParseDeviceFlags(const DeviceFlags& flags) {
  DeviceChoice choice;
  absl::StatusOr<Device> device = ParseDevice("--device", flags.device);
  if (!device.ok()) return device.status();
  choice.device = *device;
  absl::StatusOr<CudaWeights> weights = ParseCudaWeights(flags.cuda_weights);
  if (!weights.ok()) return weights.status();
  choice.cuda.weights = *weights;
  choice.cuda.gpu_memory_fraction = flags.gpu_memory_fraction;
  choice.cuda.max_batched_tokens = flags.max_batched_tokens;
  absl::StatusOr<std::vector<int>> gpus = ParseGpus(flags.gpus);
  if (!gpus.ok()) return gpus.status();
  choice.cuda.gpus = *std::move(gpus);
  if (flags.cuda_sampling != "device" && flags.cuda_sampling != "host") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cuda-sampling '%s' is not a sampling place: use device or host", flags.cuda_sampling));
  }
  choice.cuda.sample_on_device = flags.cuda_sampling == "device";
  choice.cuda.cuda_graphs = flags.cuda_graphs;
  // The CUDA settings mean nothing to the CPU: there they are not checked,
  // so that the CPU's own checks (e.g. the scheduler's token budget) name
  // what is wrong.
  if (choice.device == Device::kCuda) {
    if (absl::Status s = ValidateCudaOptions(choice.cuda); !s.ok()) return s;
  }
  return choice;
}

}  // namespace tandem::device
