#include "kernels/cuda/emulation/launch_counting.h"

#include <link.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/device_memory.h"
#include "kernels/cuda/emulation/graph.h"
#include "kernels/cuda/emulation/thread_context.h"

namespace tandem::cuda_emu {
namespace {

constexpr int kWarpLanes = 32;
constexpr int kBanks = 32;
constexpr uintptr_t kSectorBytes = 32;

enum class Space : uint8_t { kGlobal, kShared };

// [begin, end) of the executable's static thread-local storage on the
// calling OS thread, where static __shared__ variables live under emulation
// (cuda_compat.cuh); empty where it cannot be found (not x86-64, or the
// layout is not the one expected: then static shared memory is not counted).
struct AddressRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool Contains(uintptr_t a) const { return a >= begin && a < end; }
};

AddressRange FindExecutableTls() {
#if defined(__x86_64__)
  struct Tls {
    std::size_t bytes = 0;
    std::size_t align = 1;
  } tls;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type == PT_TLS) {
            static_cast<Tls*>(data)->bytes = info->dlpi_phdr[i].p_memsz;
            static_cast<Tls*>(data)->align = std::max<std::size_t>(1, info->dlpi_phdr[i].p_align);
          }
        }
        return 1;  // the first object is the executable
      },
      &tls);
  if (tls.bytes == 0) return {};
  // x86-64 (TLS variant II): the executable's block lies just below the
  // thread pointer, which %fs:0 holds.
  uintptr_t thread_pointer = 0;
  asm("mov %%fs:0, %0" : "=r"(thread_pointer));
  const uintptr_t offset = (tls.bytes + tls.align - 1) / tls.align * tls.align;
  const AddressRange range{thread_pointer - offset, thread_pointer};
  // A check of the layout: the emulator's own thread-local context is there.
  if (!range.Contains(reinterpret_cast<uintptr_t>(&current_thread_context))) return {};
  return range;
#else
  return {};
#endif
}

const AddressRange& ExecutableTls() {
  thread_local const AddressRange range = FindExecutableTls();
  return range;
}

struct LaneAccess {
  uintptr_t address;
  uint32_t bytes;
  uint32_t lane;
};

// One warp request: the k-th execution of one instruction by a warp's lanes.
struct RequestKey {
  uint32_t warp;
  uint32_t occurrence;
  uintptr_t pc;
  Space space;
  bool operator==(const RequestKey& o) const {
    return warp == o.warp && occurrence == o.occurrence && pc == o.pc && space == o.space;
  }
  template <typename H>
  friend H AbslHashValue(H h, const RequestKey& k) {
    return H::combine(std::move(h), k.warp, k.occurrence, k.pc, k.space);
  }
};

struct Request {
  AccessKind kind = AccessKind::kLoad;
  absl::InlinedVector<LaneAccess, kWarpLanes> lanes;
};

int WidthIndex(uint32_t bytes) {
  if (bytes <= 1) return 0;
  if (bytes <= 2) return 1;
  if (bytes <= 4) return 2;
  if (bytes <= 8) return 3;
  return 4;
}

uint32_t Width(const Request& r) {
  uint32_t width = 0;
  for (const LaneAccess& a : r.lanes) width = std::max(width, a.bytes);
  return width;
}

// The distinct 32-byte sectors of a global request's bytes (appended to
// `launch_sectors` too); returns their count.
int64_t AddSectors(const Request& r, std::vector<uint64_t>* launch_sectors) {
  absl::InlinedVector<uint64_t, 2 * kWarpLanes> sectors;
  for (const LaneAccess& a : r.lanes) {
    for (uintptr_t s = a.address / kSectorBytes; s <= (a.address + a.bytes - 1) / kSectorBytes;
         ++s) {
      sectors.push_back(s);
    }
  }
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  launch_sectors->insert(launch_sectors->end(), sectors.begin(), sectors.end());
  return static_cast<int64_t>(sectors.size());
}

// The distinct bytes a request's lanes touch (overlaps, as in a broadcast,
// once).
int64_t UniqueBytes(const Request& r) {
  absl::InlinedVector<std::pair<uintptr_t, uintptr_t>, kWarpLanes> spans;
  for (const LaneAccess& a : r.lanes) spans.emplace_back(a.address, a.address + a.bytes);
  std::sort(spans.begin(), spans.end());
  int64_t total = 0;
  uintptr_t covered = 0;  // end of what was counted
  for (const auto& [begin, end] : spans) {
    const uintptr_t from = std::max(begin, covered);
    if (end > from) total += static_cast<int64_t>(end - from);
    covered = std::max(covered, end);
  }
  return total;
}

// Shared memory: per phase (128 bytes of lanes' accesses), the most
// distinct 4-byte words that one bank serves. Adds wavefronts and phases.
void AddWavefronts(const Request& r, uint32_t width, MemoryCounters* c) {
  const uint32_t lanes_per_phase = width <= 4 ? kWarpLanes : 128 / width;
  const uint32_t num_phases = kWarpLanes / lanes_per_phase;
  for (uint32_t phase = 0; phase < num_phases; ++phase) {
    absl::InlinedVector<std::pair<uint32_t, uintptr_t>, 4 * kWarpLanes> bank_words;
    for (const LaneAccess& a : r.lanes) {
      if (a.lane / lanes_per_phase != phase) continue;
      for (uintptr_t w = a.address / 4; w <= (a.address + a.bytes - 1) / 4; ++w) {
        bank_words.emplace_back(static_cast<uint32_t>(w % kBanks), w);
      }
    }
    if (bank_words.empty()) continue;
    std::sort(bank_words.begin(), bank_words.end());
    bank_words.erase(std::unique(bank_words.begin(), bank_words.end()), bank_words.end());
    int64_t most = 0;
    for (std::size_t i = 0; i < bank_words.size();) {
      std::size_t j = i;
      while (j < bank_words.size() && bank_words[j].first == bank_words[i].first) ++j;
      most = std::max<int64_t>(most, static_cast<int64_t>(j - i));
      i = j;
    }
    c->wavefronts += most;
    ++c->phases;
  }
}

}  // namespace

struct LaunchCounting::Launch {
  KernelCounters totals;
  bool from_graph = false;
  int block_stride = 1;
  bool record_accesses = false;
  // Live device allocations at the launch, sorted by start.
  std::vector<std::pair<uintptr_t, uintptr_t>> allocations;
  std::vector<uint64_t> sectors;  // every global request's, with repeats
  // The block being recorded.
  AddressRange dynamic_shared;
  AddressRange static_shared;  // the executable's thread-local storage
  absl::flat_hash_map<std::pair<uint32_t, uintptr_t>, uint32_t> occurrences;  // (thread, pc)
  absl::flat_hash_map<RequestKey, Request> requests;

  bool IsGlobal(uintptr_t a) const {
    auto it = std::upper_bound(allocations.begin(), allocations.end(),
                               std::make_pair(a, ~uintptr_t{0}));
    return it != allocations.begin() && a < std::prev(it)->second;
  }
  void FinishBlock();
};

namespace {
thread_local LaunchCounting::Launch* recording = nullptr;
}  // namespace

LaunchCounting::LaunchCounting(const LaunchCountingInfo& info) {
  if (!CountersEnabled()) return;
  launch_ = std::make_unique<Launch>();
  KernelCounters& t = launch_->totals;
  t.name = info.kernel_name;
  t.grid = info.grid;
  t.block = info.block;
  t.dynamic_shared_bytes = info.dynamic_shared_bytes;
  t.flops = info.flops;
  t.blocks = int64_t{info.grid.x} * info.grid.y * info.grid.z;
  t.threads = t.blocks * (int64_t{info.block.x} * info.block.y * info.block.z);
  launch_->from_graph = counters_internal::ReplayingGraph();
  launch_->block_stride = counters_internal::BlockStride();
  launch_->record_accesses = AccessCountingLinked();
  if (launch_->record_accesses) {
    for (const auto& [start, bytes] : DeviceMemory::Get().Allocations()) {
      launch_->allocations.emplace_back(start, start + bytes);
    }
  }
}

LaunchCounting::~LaunchCounting() {
  if (launch_ == nullptr) return;
  std::vector<uint64_t>& s = launch_->sectors;
  std::sort(s.begin(), s.end());
  launch_->totals.dram_bytes =
      static_cast<int64_t>(std::unique(s.begin(), s.end()) - s.begin()) * kSectorBytes;
  counters_internal::AddLaunch(launch_->totals, launch_->from_graph);
}

void LaunchCounting::BeginBlock(uint64_t linear_block, const unsigned char* dynamic_shared) {
  if (launch_ == nullptr || !launch_->record_accesses) return;
  if (linear_block % static_cast<uint64_t>(launch_->block_stride) != 0) return;
  ++launch_->totals.sampled_blocks;
  const uintptr_t shared = reinterpret_cast<uintptr_t>(dynamic_shared);
  launch_->dynamic_shared = {shared, shared + launch_->totals.dynamic_shared_bytes};
  launch_->static_shared = ExecutableTls();
  recording = launch_.get();
}

void LaunchCounting::EndBlock() {
  if (recording == nullptr) return;
  recording->FinishBlock();
  recording = nullptr;
}

void LaunchCounting::Launch::FinishBlock() {
  for (const auto& [key, request] : requests) {
    const uint32_t width = Width(request);
    MemoryCounters* c = nullptr;
    const bool store = request.kind == AccessKind::kStore;
    if (key.space == Space::kGlobal) {
      c = store ? &totals.global_stores : &totals.global_loads;
      c->sectors += AddSectors(request, &sectors);
    } else {
      c = store ? &totals.shared_stores : &totals.shared_loads;
      AddWavefronts(request, width, c);
    }
    ++c->requests;
    ++c->requests_by_width[WidthIndex(width)];
    c->lane_accesses += static_cast<int64_t>(request.lanes.size());
    c->unique_bytes += UniqueBytes(request);
    for (const LaneAccess& a : request.lanes) c->bytes += a.bytes;
  }
  requests.clear();
  occurrences.clear();
}

void LaunchCounting::RecordAccess(const void* address, unsigned size, AccessKind kind,
                                  const void* pc) {
  Launch* launch = recording;
  if (launch == nullptr || size == 0) return;
  const ThreadContext& ctx = current_thread_context;
  if (ctx.runner == nullptr) return;  // the launching thread between blocks
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  Space space;
  if (launch->IsGlobal(a)) {
    space = Space::kGlobal;
  } else if (launch->dynamic_shared.Contains(a)) {
    space = Space::kShared;
  } else if (launch->static_shared.Contains(a) &&
             !(a >= reinterpret_cast<uintptr_t>(&ctx) && a < reinterpret_cast<uintptr_t>(&ctx + 1))) {
    space = Space::kShared;  // a static __shared__ variable
  } else {
    return;  // a local or a kernel parameter
  }
  if (kind == AccessKind::kAtomic) {
    if (space == Space::kGlobal) ++launch->totals.global_atomics;
    return;
  }
  const uint3& i = ctx.thread_idx;
  const dim3& d = ctx.block_dim;
  const uint32_t thread = i.x + d.x * (i.y + d.y * i.z);
  const uintptr_t site = reinterpret_cast<uintptr_t>(pc);
  const uint32_t occurrence = launch->occurrences[{thread, site}]++;
  Request& request = launch->requests[RequestKey{thread / kWarpLanes, occurrence, site, space}];
  request.kind = kind;
  request.lanes.push_back(LaneAccess{a, size, thread % kWarpLanes});
}

}  // namespace tandem::cuda_emu
