#include "kernels/cuda/emulation/device_intrinsics.h"

#include <string>

#include "kernels/cuda/emulation/block_runner.h"
#include "kernels/cuda/emulation/fault.h"

namespace tandem::cuda_emu {
namespace {

BlockRunner& Runner(const char* intrinsic) {
  BlockRunner* runner = current_thread_context.runner;
  if (runner == nullptr) {
    Fatal(std::string(intrinsic) + " called outside a kernel launched with TANDEM_LAUNCH");
  }
  return *runner;
}

}  // namespace

void SyncThreads(const std::source_location& site) { Runner("__syncthreads").SyncThreads(site); }

uint64_t WarpCollective(const WarpArrival& arrival, const std::source_location& site) {
  return Runner(WarpOpName(arrival.op)).WarpCollective(arrival, site);
}

unsigned ActiveMask(const std::source_location& site) {
  const WarpArrival arrival{WarpOp::kActiveMask, 0, kWarpSize, 0, 0};
  return static_cast<unsigned>(Runner("__activemask").WarpCollective(arrival, site));
}

unsigned char* DynamicSharedMemory() {
  Runner("dynamic shared memory");
  return current_thread_context.dynamic_shared;
}

}  // namespace tandem::cuda_emu
