// The engine flags, defined once for every binary that runs a model (tandem
// run, tandem-worker, tandem-draft): --threads, --precision, --block-size,
// --kv-cache-bytes, --kv-blocks, --device and the CUDA backend's
// --cuda-weights, --cuda-sampling, --cuda-graphs, --gpu-memory-fraction and
// --gpus. A binary links tandem_engine_flags (libraries take EngineOptions,
// engine_options.h, and define no flags), parses its command line, and
// EngineOptionsFromFlags reads and validates them into the model's options
// and the runner's (what device::MakeModelRunner takes).
//
// --max-batched-tokens stays with each binary: it is the scheduler's step
// budget in tandem run and the coordinator, device scratch in a worker; each
// passes its value in EngineRole. The coordinator's --local flags stay its own
// (its in-process group runs on the CPU only).
#ifndef TANDEM_ENGINE_OPTIONS_ENGINE_FLAGS_H_
#define TANDEM_ENGINE_OPTIONS_ENGINE_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "engine/options/engine_options.h"

ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(std::string, precision);
ABSL_DECLARE_FLAG(int32_t, block_size);
ABSL_DECLARE_FLAG(int64_t, kv_cache_bytes);
ABSL_DECLARE_FLAG(int32_t, kv_blocks);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(std::string, cuda_weights);
ABSL_DECLARE_FLAG(std::string, cuda_sampling);
ABSL_DECLARE_FLAG(bool, cuda_graphs);
ABSL_DECLARE_FLAG(double, gpu_memory_fraction);
ABSL_DECLARE_FLAG(std::string, gpus);

namespace tandem::engine {

// The file that defines the engine flags, as the compiler named it (what
// FlagsDefinedIn, common/flags/flag_help.h, matches).
const char* EngineFlagsFile();

// What differs between the binaries: their defaults for two of the flags
// (SetEngineFlagDefaults), and the binary's own --max-batched-tokens (the
// device scratch is sized for it).
struct EngineRole {
  // --kv-cache-bytes and --gpu-memory-fraction.
  int64_t default_kv_cache_bytes = kDefaultKvCacheBytes;
  double default_gpu_memory_fraction = device::CudaOptions().gpu_memory_fraction;
  int32_t max_batched_tokens = 2048;
  // tandem-draft: its proposals are sampled on the host whatever
  // --cuda-sampling says (the flag's help says so); the value is still checked.
  bool host_sampling_only = false;
};

// Makes `role`'s defaults the flags' values; call before parsing the command
// line, so that a flag given there still wins and --help shows them
// (common/flags/flag_help.h lists each flag's value before parsing).
void SetEngineFlagDefaults(const EngineRole& role);

// Reads the engine flags; INVALID_ARGUMENT naming the first bad flag, its
// value and the limit.
absl::StatusOr<EngineOptions> EngineOptionsFromFlags(const EngineRole& role);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_OPTIONS_ENGINE_FLAGS_H_
