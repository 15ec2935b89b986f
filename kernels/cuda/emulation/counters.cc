#include "kernels/cuda/emulation/counters.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

namespace tandem::cuda_emu {
namespace {

std::atomic<bool> enabled{false};
std::atomic<bool> access_linked{false};
thread_local double declared_flops = 0;
thread_local const char* declared_name = nullptr;
thread_local bool replaying_graph = false;

struct Registry {
  std::mutex mutex;
  CounterOptions options ABSL_GUARDED_BY(mutex);
  RuntimeCounters runtime ABSL_GUARDED_BY(mutex);
  std::vector<KernelCounters> kernels ABSL_GUARDED_BY(mutex);
  absl::flat_hash_map<std::string, std::size_t> index ABSL_GUARDED_BY(mutex);

  KernelCounters& Kernel(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    auto [it, inserted] = index.try_emplace(name, kernels.size());
    if (inserted) {
      kernels.emplace_back();
      kernels.back().name = name;
    }
    return kernels[it->second];
  }
  void Clear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    runtime = RuntimeCounters{};
    kernels.clear();
    index.clear();
  }
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

bool On() { return enabled.load(std::memory_order_relaxed); }

}  // namespace

double MemoryCounters::Coalescing() const {
  return sectors == 0 ? 1.0
                      : static_cast<double>(unique_bytes) / (static_cast<double>(sectors) * 32.0);
}

void MemoryCounters::Add(const MemoryCounters& other) {
  requests += other.requests;
  lane_accesses += other.lane_accesses;
  bytes += other.bytes;
  unique_bytes += other.unique_bytes;
  sectors += other.sectors;
  wavefronts += other.wavefronts;
  phases += other.phases;
  for (std::size_t i = 0; i < requests_by_width.size(); ++i) {
    requests_by_width[i] += other.requests_by_width[i];
  }
}

double KernelCounters::AccessScale() const {
  return sampled_blocks == 0 ? 1.0
                             : static_cast<double>(blocks) / static_cast<double>(sampled_blocks);
}

const char* CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice:
      return "host_to_device";
    case CopyDirection::kDeviceToHost:
      return "device_to_host";
    case CopyDirection::kDeviceToDevice:
      return "device_to_device";
    case CopyDirection::kHostToHost:
      return "host_to_host";
  }
  return "unknown";
}

const KernelCounters* CounterSnapshot::Kernel(const std::string& name) const {
  for (const KernelCounters& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

void EnableCounters(const CounterOptions& options) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.options = options;
  r.options.block_stride = std::max(1, options.block_stride);
  r.Clear();
  enabled.store(true, std::memory_order_relaxed);
}

void DisableCounters() { enabled.store(false, std::memory_order_relaxed); }

bool CountersEnabled() { return On(); }

CounterSnapshot ReadCounters() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return CounterSnapshot{r.runtime, r.kernels};
}

void ResetCounters() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.Clear();
}

bool AccessCountingLinked() { return access_linked.load(std::memory_order_relaxed); }

void DeclareLaunchFlops(double flops) { declared_flops = flops; }

void DeclareLaunchName(const char* name) { declared_name = name; }

namespace counters_internal {

double TakeDeclaredFlops() {
  const double flops = declared_flops;
  declared_flops = 0;
  return flops;
}

void OnHostSync() {
  if (!On()) return;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ++r.runtime.host_syncs;
}

void OnCopy(CopyDirection direction, bool pinned, std::size_t bytes) {
  if (!On()) return;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  CopyCounters& c = r.runtime.copies[static_cast<int>(direction)][pinned ? 1 : 0];
  ++c.count;
  c.bytes += static_cast<int64_t>(bytes);
}

void OnMemset(std::size_t bytes) {
  if (!On()) return;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ++r.runtime.memsets.count;
  r.runtime.memsets.bytes += static_cast<int64_t>(bytes);
}

void OnGraphLaunch(int64_t nodes) {
  if (!On()) return;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ++r.runtime.graph_launches;
  r.runtime.graph_nodes += nodes;
}

const char* TakeDeclaredName(const char* fallback) {
  const char* name = declared_name != nullptr ? declared_name : fallback;
  declared_name = nullptr;
  return name;
}

bool ReplayingGraph() { return replaying_graph; }

void SetReplayingGraph(bool replaying) { replaying_graph = replaying; }

void OnLibraryGemm(const std::string& name, double flops, int64_t read_bytes,
                   int64_t written_bytes) {
  if (!On()) return;
  KernelCounters launch;
  launch.name = name;
  launch.flops = flops;
  launch.global_loads.bytes = read_bytes;
  launch.global_loads.unique_bytes = read_bytes;
  launch.global_loads.sectors = (read_bytes + 31) / 32;
  launch.global_stores.bytes = written_bytes;
  launch.global_stores.unique_bytes = written_bytes;
  launch.global_stores.sectors = (written_bytes + 31) / 32;
  launch.dram_bytes = launch.global_loads.sectors * 32 + launch.global_stores.sectors * 32;
  AddLaunch(launch, ReplayingGraph());
}

int BlockStride() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.options.block_stride;
}

void AddLaunch(const KernelCounters& launch, bool from_graph) {
  if (!On()) return;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!from_graph) ++r.runtime.kernel_launches;
  KernelCounters& k = r.Kernel(launch.name);
  ++k.launches;
  k.blocks += launch.blocks;
  k.sampled_blocks += launch.sampled_blocks;
  k.threads += launch.threads;
  k.grid = launch.grid;
  k.block = launch.block;
  k.dynamic_shared_bytes = launch.dynamic_shared_bytes;
  k.flops += launch.flops;
  k.global_loads.Add(launch.global_loads);
  k.global_stores.Add(launch.global_stores);
  k.shared_loads.Add(launch.shared_loads);
  k.shared_stores.Add(launch.shared_stores);
  k.global_atomics += launch.global_atomics;
  k.dram_bytes += launch.dram_bytes;
}

void MarkAccessCountingLinked() { access_linked.store(true, std::memory_order_relaxed); }

}  // namespace counters_internal
}  // namespace tandem::cuda_emu
