// The one place that turns --device and the KV flags into a ModelRunner and
// its KV capacity, for tandem run, tandem-worker and tandem-draft.
#ifndef TANDEM_ENGINE_DEVICE_MODEL_RUNNER_FACTORY_H_
#define TANDEM_ENGINE_DEVICE_MODEL_RUNNER_FACTORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/device/device_options.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"

namespace tandem::device {

struct RunnerOptions {
  Device device = Device::kCpu;
  CudaOptions cuda;  // for Device::kCuda
  int32_t block_size = 16;
  // > 0: the cache has this many blocks. 0: the CPU sizes it from
  // kv_cache_bytes, the GPU from cuda.gpu_memory_fraction.
  int32_t kv_blocks = 0;
  int64_t kv_cache_bytes = 0;
};

// RunnerOptions from the parsed device flags and the KV flags.
RunnerOptions RunnerOptionsFor(const DeviceChoice& device, int32_t block_size, int32_t kv_blocks,
                               int64_t kv_cache_bytes);

struct LoadedRunner {
  std::unique_ptr<model::ModelRunner> runner;  // no KV cache yet: StepExecutor makes it
  int32_t num_blocks = 0;
};

// ModelOptions::cpu_weights for `device`: the CPU's weight copies are made
// only when the CPU runs the model.
inline bool CpuWeightsFor(Device device) { return device == Device::kCpu; }

// A runner for `model` (loaded with cpu_weights = CpuWeightsFor(device);
// must outlive the runner) and the KV blocks it gets. Fails as
// CpuModelRunner / CudaModelRunner::Create and model::NumKvBlocks do.
absl::StatusOr<LoadedRunner> MakeModelRunner(model::Model* model, const RunnerOptions& options);

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_MODEL_RUNNER_FACTORY_H_
