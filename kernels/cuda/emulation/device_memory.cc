#include "kernels/cuda/emulation/device_memory.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/cuda/emulation/fault.h"

namespace tandem::cuda_emu {
namespace {

constexpr std::size_t kAlignment = 256;  // what cudaMalloc guarantees
constexpr std::size_t kDefaultCapacity = std::size_t{4} << 30;

std::size_t CapacityFromEnvironment() {
  const char* text = std::getenv("TANDEM_CUDA_EMU_DEVICE_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultCapacity;
  std::string_view view(text);
  std::size_t bytes = 0;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), bytes);
  if (error != std::errc() || end != view.data() + view.size()) {
    Fatal(std::string("TANDEM_CUDA_EMU_DEVICE_BYTES '") + text +
          "': expected a decimal byte count");
  }
  return bytes;
}

}  // namespace

DeviceMemory& DeviceMemory::Get() {
  static DeviceMemory* memory = new DeviceMemory();  // never destroyed: used until exit
  return *memory;
}

DeviceMemory::DeviceMemory() : capacity_bytes_(CapacityFromEnvironment()) {}

void* DeviceMemory::Allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // Capacity counts whole 256-byte units, as a GPU allocator would; the
  // allocation itself is exact, so ASan builds catch a kernel running past it.
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rounded > capacity_bytes_ - std::min(used_bytes_, capacity_bytes_)) return nullptr;
    used_bytes_ += rounded;
  }
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes) != 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_bytes_ -= rounded;
    return nullptr;
  }
  std::memset(p, kPoisonByte, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[reinterpret_cast<std::uintptr_t>(p)] = bytes;
  return p;
}

bool DeviceMemory::Free(void* p) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == allocations_.end()) return false;
    used_bytes_ -= (it->second + kAlignment - 1) / kAlignment * kAlignment;
    allocations_.erase(it);
  }
  std::free(p);
  return true;
}

bool DeviceMemory::Contains(const void* p, std::size_t bytes) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return false;
  --it;  // the last allocation starting at or before p
  return address - it->first < it->second && bytes <= it->second - (address - it->first);
}

std::vector<std::pair<std::uintptr_t, std::size_t>> DeviceMemory::Allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {allocations_.begin(), allocations_.end()};
}

std::size_t DeviceMemory::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

std::size_t DeviceMemory::capacity_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_bytes_;
}

void DeviceMemory::SetCapacity(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_bytes_ = bytes;
}

}  // namespace tandem::cuda_emu
