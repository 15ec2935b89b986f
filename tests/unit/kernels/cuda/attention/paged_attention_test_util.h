// A random paged KV cache on the host and on the (emulated) device, for the
// CUDA attention tests: sequences of given (start_pos, q_len) with their
// blocks scattered over the cache, random K/V in [-1, 1) in every slot a
// sequence owns and NaN in every other slot (so a kernel reading a position it
// may not see poisons its output), random queries, and the CPU reference
// (kernels::PagedAttention at Isa::kReference) to compare against.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/attention/paged_kv_cache.cuh"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda::testing {

struct SeqShape {
  int32_t start_pos = 0;  // cached positions before the sequence's queries
  int32_t q_len = 1;
};

struct AttentionShape {
  int32_t num_heads = 9;
  int32_t num_kv_heads = 3;
  int32_t head_dim = 64;
  int32_t block_size = 16;
  kernels::KvDtype dtype = kernels::KvDtype::kF32;
};

// The host side of a test case. K/V storage is f32 or raw f16 bits.
struct HostAttention {
  AttentionShape shape;
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;
  kernels::PagedKvView view;
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> block_tables;        // [num_seqs, max_blocks_per_seq], unused entries -1
  std::vector<kernels::AttentionSeq> seqs;  // block_table points into block_tables
  std::vector<float> q;                     // [num_tokens, num_heads, head_dim]
  int64_t num_tokens = 0;

  float scale() const { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }
};

inline HostAttention BuildHostAttention(const AttentionShape& shape,
                                        const std::vector<SeqShape>& specs, std::mt19937& rng) {
  HostAttention h;
  h.shape = shape;
  const int64_t row = int64_t{shape.num_kv_heads} * shape.head_dim;
  int32_t total_blocks = 0;
  for (const SeqShape& s : specs) {
    const int32_t blocks = (s.start_pos + s.q_len + shape.block_size - 1) / shape.block_size;
    h.max_blocks_per_seq = std::max(h.max_blocks_per_seq, blocks);
    total_blocks += blocks;
  }
  const int32_t num_blocks = total_blocks + 3;  // a few blocks nobody owns
  const int64_t elems = int64_t{num_blocks} * shape.block_size * row;
  std::vector<float> k(elems, NAN), v(elems, NAN);
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  h.block_tables.assign(specs.size() * h.max_blocks_per_seq, -1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  size_t next = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    const int32_t ctx = specs[s].start_pos + specs[s].q_len;
    int32_t* table = h.block_tables.data() + s * h.max_blocks_per_seq;
    for (int32_t b = 0; b * shape.block_size < ctx; ++b) table[b] = ids[next++];
    for (int32_t pos = 0; pos < ctx; ++pos) {
      const int64_t slot =
          int64_t{table[pos / shape.block_size]} * shape.block_size + pos % shape.block_size;
      for (int64_t i = 0; i < row; ++i) {
        k[slot * row + i] = uniform(rng);
        v[slot * row + i] = uniform(rng);
      }
    }
    h.seqs.push_back(
        {h.num_tokens, specs[s].q_len, specs[s].start_pos, table, h.max_blocks_per_seq});
    h.num_tokens += specs[s].q_len;
  }
  h.view = {nullptr,       nullptr, shape.dtype, num_blocks, shape.block_size, shape.num_kv_heads,
            shape.head_dim};
  if (shape.dtype == kernels::KvDtype::kF32) {
    h.k32 = std::move(k);
    h.v32 = std::move(v);
    h.view.k = h.k32.data();
    h.view.v = h.v32.data();
  } else {
    for (float x : k) h.k16.push_back(gguf::Fp32ToFp16(x));
    for (float x : v) h.v16.push_back(gguf::Fp32ToFp16(x));
    h.view.k = h.k16.data();
    h.view.v = h.v16.data();
  }
  h.q.resize(h.num_tokens * shape.num_heads * shape.head_dim);
  for (float& x : h.q) x = uniform(rng);
  return h;
}

// kernels::PagedAttention at Isa::kReference: [num_tokens, num_heads, head_dim].
inline std::vector<float> ReferenceAttention(const HostAttention& h) {
  std::vector<float> out(h.q.size());
  kernels::AttentionParams params{kernels::Isa::kReference, h.shape.num_heads, h.scale()};
  kernels::PagedAttention(h.q.data(), h.seqs, h.view, params, out.data(), nullptr);
  return out;
}

// The cache in device memory; `cache` points at it.
struct DeviceKvCache {
  explicit DeviceKvCache(const HostAttention& h)
      : k32(h.k32.empty() ? 1 : h.k32.size()),
        v32(h.v32.empty() ? 1 : h.v32.size()),
        k16(h.k16.empty() ? 1 : h.k16.size()),
        v16(h.v16.empty() ? 1 : h.v16.size()) {
    cache = {nullptr,           nullptr,           KvCacheDtype::kF32,
             h.view.num_blocks, h.view.block_size, h.view.num_kv_heads,
             h.view.head_dim};
    if (h.shape.dtype == kernels::KvDtype::kF32) {
      k32.Upload(h.k32);
      v32.Upload(h.v32);
      cache.k = k32.get();
      cache.v = v32.get();
    } else {
      k16.Upload(h.k16);
      v16.Upload(h.v16);
      cache.k = k16.get();
      cache.v = v16.get();
      cache.dtype = KvCacheDtype::kF16;
    }
  }
  cuda_emu::testing::DeviceBuffer<float> k32, v32;
  cuda_emu::testing::DeviceBuffer<uint16_t> k16, v16;
  PagedKvCache cache;
};

// The largest |a - b|; NaN anywhere makes it NaN (so EXPECT_LE fails).
inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return NAN;
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace tandem::cuda::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_TEST_UTIL_H_
