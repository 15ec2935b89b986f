// WriteKv and CopyKvBlocks: moving K/V rows into and between cache pages.
#include <cstring>

#include "common/logging.h"
#include "kernels/quant_formats.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

int64_t ElemBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

// dst[0, n) = src[0, n) in the cache's dtype (f16: round to nearest even).
void StoreRow(const float* src, int64_t n, KvDtype dtype, void* dst) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = gguf::Fp32ToFp16(src[i]);
}

}  // namespace

void WriteKv(const PagedKvView& cache, const float* k, const float* v, const int64_t* slots,
             int64_t num_tokens) {
  const int64_t row = static_cast<int64_t>(cache.num_kv_heads) * cache.head_dim;
  const int64_t row_bytes = row * ElemBytes(cache.dtype);
  const int64_t num_slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    CHECK(slots[t] >= 0 && slots[t] < num_slots, "WriteKv: slot %d outside [0, %d)", slots[t],
          num_slots);
    StoreRow(k + t * row, row, cache.dtype, static_cast<uint8_t*>(cache.k) + slots[t] * row_bytes);
    StoreRow(v + t * row, row, cache.dtype, static_cast<uint8_t*>(cache.v) + slots[t] * row_bytes);
  }
}

void CopyKvBlocks(const PagedKvView& cache, const int32_t* src, const int32_t* dst,
                  int64_t num_copies) {
  const int64_t block_bytes = static_cast<int64_t>(cache.block_size) * cache.num_kv_heads *
                              cache.head_dim * ElemBytes(cache.dtype);
  for (int64_t i = 0; i < num_copies; ++i) {
    CHECK(src[i] >= 0 && src[i] < cache.num_blocks && dst[i] >= 0 && dst[i] < cache.num_blocks,
          "CopyKvBlocks: %d -> %d outside [0, %d)", src[i], dst[i], cache.num_blocks);
    if (src[i] == dst[i]) continue;
    for (void* base : {cache.k, cache.v}) {
      uint8_t* b = static_cast<uint8_t*>(base);
      std::memcpy(b + dst[i] * block_bytes, b + src[i] * block_bytes, block_bytes);
    }
  }
}

}  // namespace tandem::kernels
