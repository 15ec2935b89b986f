// PackRows16 and its layout helpers (see packed_rows16.h).
#include "kernels/cpu/packed_rows16.h"

#include <cstring>

#include "common/logging.h"
#include "kernels/quant_formats.h"
#include "kernels/cpu/quant_kernels.h"

namespace tandem::kernels {
namespace {

template <class Block>
void PackTyped(const WeightView& w, uint8_t* out) {
  constexpr bool kQ8 = sizeof(Block::qs) == 32;
  constexpr bool kHasMin = requires(Block b) { b.m; };
  constexpr int kGroups = sizeof(Block::qs) / 4;  // J
  const int64_t nb = w.cols / 32;
  const int64_t groups = (w.rows + kPackedRows - 1) / kPackedRows;
  const int64_t block_bytes = PackedBlockBytes(w.type);
  std::memset(out, 0, groups * nb * block_bytes);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* p = out + (g * nb + b) * block_bytes;
      uint8_t* q = p + (kHasMin ? 64 : 32);
      for (int lane = 0; lane < kPackedRows; ++lane) {
        const int64_t r = g * kPackedRows + lane;
        if (r >= w.rows) break;  // padding lanes stay zero
        const Block& blk =
            reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) + r * w.row_bytes)[b];
        std::memcpy(p + 2 * lane, &blk.d, 2);
        if constexpr (kHasMin) std::memcpy(p + 32 + 2 * lane, &blk.m, 2);
        for (int j = 0; j < kGroups; ++j) {
          uint32_t v;
          std::memcpy(&v, blk.qs + 4 * j, 4);
          if constexpr (kQ8) v ^= 0x80808080u;  // s8 -> s8 + 128 as u8
          std::memcpy(q + (j * kPackedRows + lane) * 4, &v, 4);
        }
      }
    }
  }
}

}  // namespace

int64_t PackedBlockBytes(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ8_0:
      return 32 + 8 * kPackedRows * 4;
    case gguf::GgmlType::kQ4_0:
      return 32 + 4 * kPackedRows * 4;
    case gguf::GgmlType::kQ4_1:
      return 64 + 4 * kPackedRows * 4;
    default:
      return 0;
  }
}

int32_t PackedWeightOffset(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ8_0:
      return 128;
    case gguf::GgmlType::kQ4_0:
      return 8;
    default:
      return 0;
  }
}

int64_t PackedRows16Bytes(const WeightView& w) {
  const int64_t block_bytes = PackedBlockBytes(w.type);
  if (block_bytes == 0 || w.cols % 32 != 0) return 0;
  return (w.rows + kPackedRows - 1) / kPackedRows * (w.cols / 32) * block_bytes;
}

bool PackedRowsUsed(Isa isa, gguf::GgmlType type) {
  return PackedTileForType(QuantKernelsFor(isa), type) != nullptr;
}

void PackRows16(const WeightView& w, uint8_t* out) {
  CHECK(PackedBlockBytes(w.type) != 0 && w.cols % 32 == 0, "PackRows16: type %d, %d cols",
        static_cast<int>(w.type), w.cols);
  switch (w.type) {
    case gguf::GgmlType::kQ8_0:
      return PackTyped<gguf::BlockQ8_0>(w, out);
    case gguf::GgmlType::kQ4_0:
      return PackTyped<gguf::BlockQ4_0>(w, out);
    default:
      return PackTyped<gguf::BlockQ4_1>(w, out);
  }
}

}  // namespace tandem::kernels
