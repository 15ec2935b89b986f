#include "engine/options/engine_options.h"

namespace tandem::engine {

device::RunnerOptions EngineOptions::Runner() const {
  return device::RunnerOptionsFor(device, block_size, kv_blocks, kv_cache_bytes);
}

}  // namespace tandem::engine
