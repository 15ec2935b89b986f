// WriteKv and CopyKvBlocks (kernels/cuda/attention/kv_cache.cu) under emulation
// against kernels::WriteKv / kernels::CopyKvBlocks, f32 and f16 caches, in
// several execution orders. Tolerance: none, the whole cache (written and
// untouched slots) must have the reference's bytes.
#include "kernels/cuda/attention/kv_cache.cuh"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;
using kernels::KvDtype;
using kernels::PagedKvView;
using kernels::testing::RandomFloats;

struct Shape {
  KvDtype dtype;
  int32_t num_blocks, block_size, num_kv_heads, head_dim;
  int64_t row() const { return int64_t{num_kv_heads} * head_dim; }
  int64_t cache_bytes() const {
    return int64_t{num_blocks} * block_size * row() * (dtype == KvDtype::kF32 ? 4 : 2);
  }
};

// A cache filled with random bytes, on the host and the same on the device.
struct Cache {
  Shape shape;
  std::vector<uint8_t> k, v;
  DeviceBuffer<uint8_t> d_k, d_v;

  Cache(const Shape& s, std::mt19937& rng)
      : shape(s),
        k(RandomBytes(s.cache_bytes(), rng)),
        v(RandomBytes(s.cache_bytes(), rng)),
        d_k(k),
        d_v(v) {}
  PagedKvView Host() { return View(k.data(), v.data()); }
  PagedKvView Device() { return View(d_k.get(), d_v.get()); }
  void ExpectDeviceEqualsHost() {
    EXPECT_TRUE(d_k.Download() == k) << "K differs";
    EXPECT_TRUE(d_v.Download() == v) << "V differs";
  }

 private:
  PagedKvView View(void* pk, void* pv) {
    return {pk,
            pv,
            shape.dtype,
            shape.num_blocks,
            shape.block_size,
            shape.num_kv_heads,
            shape.head_dim};
  }
  static std::vector<uint8_t> RandomBytes(int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> b(n);
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
    return b;
  }
};

// K/V values in [-4, 4] plus ones that f16 rounds to its limits: the largest
// half, overflow to infinity, subnormals, and values that underflow to ±0.
std::vector<float> KvValues(int64_t n, std::mt19937& rng) {
  std::vector<float> x = RandomFloats(rng, n, -4, 4);
  const float special[] = {65504.0f, 65519.0f, 65520.0f, -1e6f, 1e-6f, -3e-8f, 2e-8f, 0.1f};
  for (size_t i = 0; i < std::size(special) && i < x.size(); ++i) x[i * 7 % x.size()] = special[i];
  return x;
}

// Writes `slots` (distinct; those outside the cache are padding) on the
// device and the in-range ones with the reference; compares the caches.
void ExpectWriteMatches(const Shape& s, const std::vector<int64_t>& slots, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << (s.dtype == KvDtype::kF32 ? "f32" : "f16") << " blocks " << s.num_blocks << " x "
               << s.block_size << " heads " << s.num_kv_heads << " dim " << s.head_dim);
  std::mt19937 rng(seed);
  Cache cache(s, rng);
  const int64_t n = slots.size();
  const std::vector<float> k = KvValues(n * s.row(), rng), v = KvValues(n * s.row(), rng);
  DeviceBuffer<float> d_k(k), d_v(v);
  DeviceBuffer<int64_t> d_slots(slots);
  ASSERT_TRUE(WriteKv(cache.Device(), d_k.get(), d_v.get(), d_slots.get(), n, nullptr).ok());
  const int64_t num_slots = int64_t{s.num_blocks} * s.block_size;
  for (int64_t t = 0; t < n; ++t) {
    if (slots[t] < 0 || slots[t] >= num_slots) continue;
    kernels::WriteKv(cache.Host(), k.data() + t * s.row(), v.data() + t * s.row(), &slots[t], 1);
  }
  cache.ExpectDeviceEqualsHost();
}

// Copies block pairs on the device and the valid ones with the reference.
void ExpectCopyMatches(const Shape& s, const std::vector<int32_t>& src,
                       const std::vector<int32_t>& dst, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << (s.dtype == KvDtype::kF32 ? "f32" : "f16") << " blocks " << s.num_blocks << " x "
               << s.block_size << " heads " << s.num_kv_heads << " dim " << s.head_dim);
  std::mt19937 rng(seed);
  Cache cache(s, rng);
  DeviceBuffer<int32_t> d_src(src), d_dst(dst);
  ASSERT_TRUE(CopyKvBlocks(cache.Device(), d_src.get(), d_dst.get(), src.size(), nullptr).ok());
  for (size_t i = 0; i < src.size(); ++i) {
    auto valid = [&](int32_t b) { return b >= 0 && b < s.num_blocks; };
    if (valid(src[i]) && valid(dst[i])) kernels::CopyKvBlocks(cache.Host(), &src[i], &dst[i], 1);
  }
  cache.ExpectDeviceEqualsHost();
}

// SmolLM2-135M's cache layer: 3 KV heads of 64, blocks of 16 (6 KiB f16
// blocks: the 16-byte copy path); and an odd one (5 slots of 1 x 7: 70 / 140
// bytes per block, the 2-byte copy path).
const Shape kShapes[] = {{KvDtype::kF32, 12, 16, 3, 64},
                         {KvDtype::kF16, 12, 16, 3, 64},
                         {KvDtype::kF32, 9, 5, 1, 7},
                         {KvDtype::kF16, 9, 5, 1, 7}};

class KvCacheTest : public cuda_emu::testing::OrderedTest {};

// A prefill chunk over block boundaries in scattered blocks, with padding
// (-1) and out-of-range slots skipped; then a decode batch of single slots.
TEST_P(KvCacheTest, WriteKvMatchesReference) {
  for (const Shape& s : kShapes) {
    const int64_t num_slots = int64_t{s.num_blocks} * s.block_size;
    std::vector<int64_t> prefill;
    for (int64_t i = 0; i < 23; ++i) prefill.push_back((i * 7 + 3) % num_slots);
    prefill.insert(prefill.begin() + 4, -1);
    prefill.push_back(num_slots);
    ExpectWriteMatches(s, prefill, 1);
    ExpectWriteMatches(s, {num_slots - 1, 0, s.block_size}, 2);
  }
}

// Copy-on-write copies into fresh blocks from shared ones (one source twice),
// with a src == dst pair and out-of-range pairs skipped.
TEST_P(KvCacheTest, CopyKvBlocksMatchesReference) {
  for (const Shape& s : kShapes) {
    ExpectCopyMatches(s, {1, 4, 1, 3, 0, -1, 2}, {5, 6, 7, 3, s.num_blocks, 0, 8}, 3);
    ExpectCopyMatches(s, {0}, {1}, 4);
  }
}

TEST_P(KvCacheTest, RejectsBadArguments) {
  DeviceBuffer<uint8_t> k(1024), v(1024);
  DeviceBuffer<int64_t> slots(std::vector<int64_t>{0});
  DeviceBuffer<int32_t> ids(std::vector<int32_t>{0});
  DeviceBuffer<float> x(64);
  const PagedKvView good{k.get(), v.get(), KvDtype::kF32, 2, 4, 1, 8};
  PagedKvView empty = good;
  empty.block_size = 0;
  EXPECT_EQ(WriteKv(empty, x.get(), x.get(), slots.get(), 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyKvBlocks(empty, ids.get(), ids.get(), 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKv(good, x.get(), x.get(), slots.get(), -1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyKvBlocks(good, ids.get(), ids.get(), -1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(WriteKv(good, x.get(), x.get(), slots.get(), 0, nullptr).ok());
  EXPECT_TRUE(CopyKvBlocks(good, ids.get(), ids.get(), 0, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(Orders, KvCacheTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
