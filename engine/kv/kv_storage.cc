#include "engine/kv/kv_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::kv {
namespace {

int64_t DtypeBytes(kernels::KvDtype dtype) {
  switch (dtype) {
    case kernels::KvDtype::kF32:
      return 4;
    case kernels::KvDtype::kF16:
      return 2;
  }
  return 0;
}

constexpr int64_t kPlaneAlignment = 64;

int64_t SaturateToInt64(unsigned __int128 value) {
  constexpr auto kMax = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  return value > kMax ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(value);
}

// Bytes of one block in one K or V plane of one layer.
unsigned __int128 PlaneBlockBytes(const KvStorageConfig& c) {
  if (c.block_size < 0 || c.num_kv_heads < 0 || c.head_dim < 0) return 0;
  return static_cast<unsigned __int128>(c.block_size) * c.num_kv_heads * c.head_dim *
         DtypeBytes(c.dtype);
}

absl::Status CheckRange(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvStorageConfig.%s is %d; must be in [%d, %d]", name, value, min, max));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t KvStorage::BytesPerBlock(const KvStorageConfig& config) {
  if (config.num_layers < 0) return 0;
  return SaturateToInt64(PlaneBlockBytes(config) * 2 * config.num_layers);
}

int32_t KvStorage::NumBlocksForBytes(const KvStorageConfig& shape_without_blocks, int64_t bytes) {
  const int64_t per_block = BytesPerBlock(shape_without_blocks);
  if (per_block <= 0 || bytes <= 0) return 0;
  return static_cast<int32_t>(
      std::min<int64_t>(bytes / per_block, std::numeric_limits<int32_t>::max()));
}

int64_t KvStorage::MemoryLimitBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return std::numeric_limits<int64_t>::max();
  return SaturateToInt64(static_cast<unsigned __int128>(pages) * page_size * 3 / 4);
}

absl::StatusOr<std::unique_ptr<KvStorage>> KvStorage::Create(const KvStorageConfig& config) {
  absl::Status status = CheckRange("num_layers", config.num_layers, 1, kMaxLayers);
  if (status.ok()) {
    status = CheckRange("num_blocks", config.num_blocks, 1, std::numeric_limits<int32_t>::max());
  }
  if (status.ok()) status = CheckRange("block_size", config.block_size, 1, kMaxBlockSize);
  if (status.ok()) status = CheckRange("num_kv_heads", config.num_kv_heads, 1, kMaxKvHeads);
  if (status.ok()) status = CheckRange("head_dim", config.head_dim, 1, kMaxHeadDim);
  if (!status.ok()) return status;
  if (DtypeBytes(config.dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvStorageConfig.dtype %d is not a KV cache dtype", static_cast<int>(config.dtype)));
  }
  // Dimensions are bounded above, so these fit in 128 bits with room.
  const unsigned __int128 block_bytes = PlaneBlockBytes(config);
  const unsigned __int128 plane = (block_bytes * config.num_blocks + kPlaneAlignment - 1) /
                                  kPlaneAlignment * kPlaneAlignment;
  const unsigned __int128 total = plane * 2 * config.num_layers;
  const int64_t limit = MemoryLimitBytes();
  if (total > static_cast<unsigned __int128>(limit)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache of %d layers x %d blocks x %d bytes per block needs %d bytes; the limit is %d "
        "bytes (3/4 of physical memory)",
        config.num_layers, config.num_blocks, BytesPerBlock(config), SaturateToInt64(total),
        limit));
  }
  const int64_t total_bytes = static_cast<int64_t>(total);
  // Anonymous mappings are zero-filled and page-aligned; pages are only
  // committed when first touched.
  void* base = mmap(nullptr, static_cast<size_t>(total_bytes), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "mmap of %d bytes for the KV cache failed: %s", total_bytes, std::strerror(errno)));
  }
  return std::unique_ptr<KvStorage>(new KvStorage(config, static_cast<std::byte*>(base),
                                                  total_bytes, static_cast<int64_t>(plane)));
}

KvStorage::KvStorage(const KvStorageConfig& config, std::byte* base, int64_t total_bytes,
                     int64_t plane_stride)
    : config_(config),
      base_(base),
      total_bytes_(total_bytes),
      plane_stride_(plane_stride),
      block_bytes_(static_cast<int64_t>(PlaneBlockBytes(config))) {}

KvStorage::~KvStorage() { munmap(base_, static_cast<size_t>(total_bytes_)); }

std::byte* KvStorage::Plane(int32_t layer, int plane) const {
  return base_ + (static_cast<int64_t>(layer) * 2 + plane) * plane_stride_;
}

kernels::PagedKvView KvStorage::LayerView(int32_t layer) {
  CHECK(layer >= 0 && layer < config_.num_layers, "layer %d out of range [0, %d)", layer,
        config_.num_layers);
  kernels::PagedKvView view;
  view.k = Plane(layer, 0);
  view.v = Plane(layer, 1);
  view.dtype = config_.dtype;
  view.num_blocks = config_.num_blocks;
  view.block_size = config_.block_size;
  view.num_kv_heads = config_.num_kv_heads;
  view.head_dim = config_.head_dim;
  return view;
}

void KvStorage::CopyBlocks(std::span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) {
    CHECK(copy.src.value() >= 0 && copy.src.value() < config_.num_blocks &&
              copy.dst.value() >= 0 && copy.dst.value() < config_.num_blocks,
          "copy %d -> %d out of range [0, %d)", copy.src.value(), copy.dst.value(),
          config_.num_blocks);
    CHECK(copy.src != copy.dst, "copy of block %d onto itself", copy.src.value());
  }
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    for (int plane = 0; plane < 2; ++plane) {
      std::byte* pages = Plane(layer, plane);
      for (const BlockCopy& copy : copies) {
        std::memcpy(pages + copy.dst.value() * block_bytes_,
                    pages + copy.src.value() * block_bytes_, static_cast<size_t>(block_bytes_));
      }
    }
  }
}

}  // namespace tandem::kv
