#include "engine/options/engine_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/kv/kv_manager.h"

ABSL_FLAG(int32_t, threads, 0, "Threads for one forward (0 = every core)");
ABSL_FLAG(std::string, precision, "fast", "fast (quantized kernels, f16 KV) or reference (f32)");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(int64_t, kv_cache_bytes, tandem::engine::kDefaultKvCacheBytes,
          "KV cache capacity in bytes (tandem-draft: of the draft model)");
ABSL_FLAG(int32_t, kv_blocks, 0, "KV cache capacity in blocks (overrides --kv-cache-bytes)");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, or cuda: the CUDA backend (emulated on the CPU unless built with "
          "-DTANDEM_CUDA_RUNTIME=gpu); a tandem-worker group under mpirun puts every rank "
          "on its own GPU, NCCL between them");
ABSL_FLAG(std::string, cuda_weights, "bf16",
          "--device cuda: bf16 (weights dequantized to bf16) or native (kept quantized)");
ABSL_FLAG(std::string, cuda_sampling, "device",
          "--device cuda: device (sample on the GPU, only tokens come back) or host (copy the "
          "logits to the host and sample there); tandem-draft samples on the host");
ABSL_FLAG(bool, cuda_graphs, true,
          "--device cuda: run decode steps as CUDA graphs captured per batch shape "
          "(--nocuda-graphs: launch every kernel each step)");
ABSL_FLAG(double, gpu_memory_fraction, tandem::device::CudaOptions().gpu_memory_fraction,
          "--device cuda: share of GPU memory for weights, scratch and KV cache (sizes the "
          "cache unless --kv-blocks is set)");
ABSL_FLAG(std::string, gpus, "",
          "--device cuda: device ordinals of this node's ranks, by local rank (e.g. 0,1,2,3); "
          "empty: local rank r uses device r");

namespace tandem::engine {
namespace {

// --threads and --precision into the model's options.
absl::Status ReadModelFlags(EngineOptions& e) {
  const int32_t threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--threads %d is negative: must be >= 0 (0 = every core)", threads));
  }
  e.model.num_threads = threads;
  e.precision = absl::GetFlag(FLAGS_precision);
  if (e.precision == "reference") {
    e.model.precision = model::Precision::kReference;
  } else if (e.precision != "fast") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--precision '%s' must be fast or reference", e.precision));
  }
  return absl::OkStatus();
}

// --block-size, --kv-blocks and --kv-cache-bytes (the KV budget itself is
// checked where the cache is sized, model::NumKvBlocks).
absl::Status ReadKvFlags(EngineOptions& e) {
  e.block_size = absl::GetFlag(FLAGS_block_size);
  if (e.block_size < 1 || e.block_size > kv::kMaxBlockSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--block-size %d is out of range: must be in [1, %d]", e.block_size, kv::kMaxBlockSize));
  }
  e.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  e.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  return absl::OkStatus();
}

// --device and the CUDA flags.
absl::Status ReadDeviceFlags(const EngineRole& role, EngineOptions& e) {
  device::DeviceFlags flags;
  flags.device = absl::GetFlag(FLAGS_device);
  flags.cuda_weights = absl::GetFlag(FLAGS_cuda_weights);
  flags.gpu_memory_fraction = absl::GetFlag(FLAGS_gpu_memory_fraction);
  flags.max_batched_tokens = role.max_batched_tokens;
  flags.gpus = absl::GetFlag(FLAGS_gpus);
  flags.cuda_sampling = absl::GetFlag(FLAGS_cuda_sampling);
  flags.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  ASSIGN_OR_RETURN(e.device, device::ParseDeviceFlags(flags));
  if (role.host_sampling_only) e.device.cuda.sample_on_device = false;
  e.model.cpu_weights = device::CpuWeightsFor(e.device.device);
  return absl::OkStatus();
}

}  // namespace

const char* EngineFlagsFile() { return __FILE__; }

void SetEngineFlagDefaults(const EngineRole& role) {
  absl::SetFlag(&FLAGS_kv_cache_bytes, role.default_kv_cache_bytes);
  absl::SetFlag(&FLAGS_gpu_memory_fraction, role.default_gpu_memory_fraction);
}

absl::StatusOr<EngineOptions> EngineOptionsFromFlags(const EngineRole& role) {
  EngineOptions e;
  RETURN_IF_ERROR(ReadModelFlags(e));
  RETURN_IF_ERROR(ReadKvFlags(e));
  RETURN_IF_ERROR(ReadDeviceFlags(role, e));
  return e;
}

}  // namespace tandem::engine
