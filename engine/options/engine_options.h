// EngineOptions: how a process loads and runs a model (threads, precision,
// KV cache sizing, device), as the engine flags give them
// (engine_flags.h); what the runner factory takes. Plain data, so that
// libraries can take it without defining the flags.
#ifndef TANDEM_ENGINE_OPTIONS_ENGINE_OPTIONS_H_
#define TANDEM_ENGINE_OPTIONS_ENGINE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "engine/device/device_options.h"
#include "engine/device/model_runner_factory.h"
#include "engine/model/model.h"

namespace tandem::engine {

// --kv-cache-bytes unless a binary sets its own (tandem-draft).
inline constexpr int64_t kDefaultKvCacheBytes = 512ll << 20;

struct EngineOptions {
  model::ModelOptions model;  // num_threads, precision, cpu_weights
  std::string precision = "fast";  // or "reference", as given
  int32_t block_size = 16;
  int32_t kv_blocks = 0;       // > 0 overrides kv_cache_bytes
  int64_t kv_cache_bytes = kDefaultKvCacheBytes;
  device::DeviceChoice device;

  // What device::MakeModelRunner takes.
  device::RunnerOptions Runner() const;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_OPTIONS_ENGINE_OPTIONS_H_
