// The counting of one kernel launch (counters.h): its launch and FLOP
// counts, and, for the sampled blocks, the memory accesses that the access
// hooks report, grouped per warp request and summed into the kernel's
// counters when the launch ends. Internal to kernels/cuda/emulation.
//
// Thread-safety: one LaunchCounting per launch, on the launching thread
// (which runs all its blocks); RecordAccess is called on that thread, from
// the fibers of the block being run.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_COUNTING_H_
#define TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_COUNTING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/emulation/cuda_types.h"

namespace tandem::cuda_emu {

enum class AccessKind : uint8_t { kLoad, kStore, kAtomic };

struct LaunchCountingInfo {
  const char* kernel_name = "";
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  double flops = 0;
};

class LaunchCounting {
 public:
  // Counts the launch when counters are enabled; otherwise does nothing.
  explicit LaunchCounting(const LaunchCountingInfo& info);
  // Adds what the launch's sampled blocks did to its kernel's counters.
  ~LaunchCounting();
  LaunchCounting(const LaunchCounting&) = delete;
  LaunchCounting& operator=(const LaunchCounting&) = delete;

  // Around each block: when the block is sampled, the calling thread's
  // accesses between the two calls are recorded.
  void BeginBlock(uint64_t linear_block, const unsigned char* dynamic_shared);
  void EndBlock();

  // From the access hooks: the emulated thread running now accessed
  // [address, address + size). Cheap when nothing is being recorded.
  static void RecordAccess(const void* address, unsigned size, AccessKind kind, const void* pc);

  struct Launch;  // the launch's counts (launch_counting.cc)

 private:
  std::unique_ptr<Launch> launch_;  // null when not counting
};

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_COUNTING_H_
