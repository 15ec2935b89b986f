// The emulated GPU's memory: host allocations that the runtime calls know as
// "device" memory, so that cudaMemcpy can check its direction and bounds
// the way a GPU's separate address space would. Fresh allocations are
// filled with 0xFF bytes (NaN as floats, -1 as integers) rather than zeros,
// so a kernel that reads memory it never wrote gives visibly wrong results.
//
// The capacity (what cudaMemGetInfo reports as total, and the limit of
// cudaMalloc) is 4 GiB unless the environment variable
// TANDEM_CUDA_EMU_DEVICE_BYTES or SetCapacity says otherwise: small, since a
// backend sizing its caches from free memory takes host memory here.
//
// Thread-safety: thread-safe.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_DEVICE_MEMORY_H_
#define TANDEM_KERNELS_CUDA_EMULATION_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace tandem::cuda_emu {

inline constexpr unsigned char kPoisonByte = 0xFF;

class DeviceMemory {
 public:
  static DeviceMemory& Get();

  // 256-byte aligned, poisoned, exactly `bytes` long (Contains and ASan
  // see its end); nullptr when `bytes` would exceed the capacity. Zero bytes
  // gives nullptr too (and is not an error).
  void* Allocate(std::size_t bytes);
  // False when `p` is not the start of a live allocation.
  bool Free(void* p);
  // Whether [p, p + bytes) lies inside one live allocation.
  bool Contains(const void* p, std::size_t bytes) const;
  // Whether p points into any live allocation.
  bool IsDevicePointer(const void* p) const { return Contains(p, 1); }

  // The live allocations: (start address, bytes).
  std::vector<std::pair<std::uintptr_t, std::size_t>> Allocations() const;

  std::size_t used_bytes() const;
  std::size_t capacity_bytes() const;
  // Applies to later allocations; existing ones stay.
  void SetCapacity(std::size_t bytes);

 private:
  DeviceMemory();

  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> allocations_ ABSL_GUARDED_BY(mutex_);  // start -> bytes
  // In whole 256-byte units.
  std::size_t used_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  std::size_t capacity_bytes_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_DEVICE_MEMORY_H_
