#include "engine/kv/kv_storage.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

KvStorageConfig SmallConfig(kernels::KvDtype dtype = kernels::KvDtype::kF32) {
  return {.num_layers = 3, .num_blocks = 5, .block_size = 4, .num_kv_heads = 2, .head_dim = 8,
          .dtype = dtype};
}

TEST(KvStorageTest, Sizes) {
  KvStorageConfig config = SmallConfig();
  // 2 (K, V) * 3 layers * 4 tokens * 2 heads * 8 dims * 4 bytes.
  EXPECT_EQ(KvStorage::BytesPerBlock(config), 2 * 3 * 4 * 2 * 8 * 4);
  config.dtype = kernels::KvDtype::kF16;
  EXPECT_EQ(KvStorage::BytesPerBlock(config), 2 * 3 * 4 * 2 * 8 * 2);
  EXPECT_EQ(KvStorage::NumBlocksForBytes(config, 768 * 10 + 767), 10);
  EXPECT_EQ(KvStorage::NumBlocksForBytes(config, 767), 0);
  EXPECT_EQ(KvStorage::NumBlocksForBytes(config, -5), 0);
  EXPECT_EQ(KvStorage::NumBlocksForBytes(config, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int32_t>::max());
  config.num_layers = 0;
  EXPECT_EQ(KvStorage::NumBlocksForBytes(config, 1 << 20), 0);
}

TEST(KvStorageTest, CreateGivesZeroedViews) {
  auto storage = KvStorage::Create(SmallConfig());
  ASSERT_TRUE(storage.ok()) << storage.status();
  EXPECT_GE((*storage)->total_bytes(), KvStorage::BytesPerBlock(SmallConfig()) * 5);
  const size_t plane_bytes = 5 * 4 * 2 * 8 * sizeof(float);
  std::vector<void*> planes;
  for (int32_t layer = 0; layer < 3; ++layer) {
    kernels::PagedKvView view = (*storage)->LayerView(layer);
    EXPECT_EQ(view.dtype, kernels::KvDtype::kF32);
    EXPECT_EQ(view.num_blocks, 5);
    EXPECT_EQ(view.block_size, 4);
    EXPECT_EQ(view.num_kv_heads, 2);
    EXPECT_EQ(view.head_dim, 8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view.k) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view.v) % 64, 0u);
    for (void* plane : {view.k, view.v}) {
      const float* data = static_cast<const float*>(plane);
      for (size_t i = 0; i < plane_bytes / sizeof(float); ++i) ASSERT_EQ(data[i], 0.0f);
      planes.push_back(plane);
    }
  }
  // Planes do not overlap: fill each with its own value and read it back.
  for (size_t p = 0; p < planes.size(); ++p) {
    std::vector<float> fill(plane_bytes / sizeof(float), static_cast<float>(p + 1));
    std::memcpy(planes[p], fill.data(), plane_bytes);
  }
  for (size_t p = 0; p < planes.size(); ++p) {
    const float* data = static_cast<const float*>(planes[p]);
    EXPECT_EQ(data[0], static_cast<float>(p + 1));
    EXPECT_EQ(data[plane_bytes / sizeof(float) - 1], static_cast<float>(p + 1));
  }
}

TEST(KvStorageTest, CopyBlocksMovesEveryLayerKAndV) {
  for (kernels::KvDtype dtype : {kernels::KvDtype::kF32, kernels::KvDtype::kF16}) {
    KvStorageConfig config = SmallConfig(dtype);
    auto created = KvStorage::Create(config);
    ASSERT_TRUE(created.ok()) << created.status();
    KvStorage& storage = **created;
    const size_t block_bytes = KvStorage::BytesPerBlock(config) / (2 * config.num_layers);
    // Byte pattern unique per (layer, plane, block, offset).
    auto pattern = [&](int layer, int plane, int block, size_t i) {
      return static_cast<uint8_t>((layer * 131 + plane * 71 + block * 29 + i * 7 + 1) % 251);
    };
    for (int layer = 0; layer < 3; ++layer) {
      kernels::PagedKvView view = storage.LayerView(layer);
      for (int plane = 0; plane < 2; ++plane) {
        auto* bytes = static_cast<uint8_t*>(plane == 0 ? view.k : view.v);
        for (int block = 0; block < 5; ++block) {
          for (size_t i = 0; i < block_bytes; ++i) {
            bytes[block * block_bytes + i] = pattern(layer, plane, block, i);
          }
        }
      }
    }
    const std::vector<BlockCopy> copies = {{BlockId(1), BlockId(3)}, {BlockId(4), BlockId(0)}};
    storage.CopyBlocks(copies);
    for (int layer = 0; layer < 3; ++layer) {
      kernels::PagedKvView view = storage.LayerView(layer);
      for (int plane = 0; plane < 2; ++plane) {
        const auto* bytes = static_cast<const uint8_t*>(plane == 0 ? view.k : view.v);
        for (int block = 0; block < 5; ++block) {
          const int source = block == 3 ? 1 : block == 0 ? 4 : block;
          for (size_t i = 0; i < block_bytes; ++i) {
            ASSERT_EQ(bytes[block * block_bytes + i], pattern(layer, plane, source, i))
                << "layer " << layer << " plane " << plane << " block " << block << " byte " << i;
          }
        }
      }
    }
  }
}

TEST(KvStorageTest, RefusesAbsurdSizes) {
  KvStorageConfig config = SmallConfig();
  config.num_layers = 4096;
  config.num_kv_heads = 64;
  config.head_dim = 256;
  config.block_size = 1024;
  config.num_blocks = std::numeric_limits<int32_t>::max();
  auto storage = KvStorage::Create(config);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(storage.status().message()).find("bytes"), std::string_view::npos);
  EXPECT_NE(std::string(storage.status().message()).find(std::to_string(KvStorage::MemoryLimitBytes())),
            std::string_view::npos)
      << storage.status();
  EXPECT_GT(KvStorage::MemoryLimitBytes(), 0);
}

TEST(KvStorageTest, RejectsInvalidConfigs) {
  auto expect_invalid = [](KvStorageConfig config, std::string_view field) {
    auto storage = KvStorage::Create(config);
    ASSERT_FALSE(storage.ok());
    EXPECT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(storage.status().message()).find(field), std::string_view::npos) << storage.status();
  };
  KvStorageConfig config = SmallConfig();
  config.num_layers = 0;
  expect_invalid(config, "num_layers is 0");
  config = SmallConfig();
  config.num_blocks = -1;
  expect_invalid(config, "num_blocks is -1");
  config = SmallConfig();
  config.block_size = 2048;
  expect_invalid(config, "block_size is 2048; must be in [1, 1024]");
  config = SmallConfig();
  config.num_kv_heads = 0;
  expect_invalid(config, "num_kv_heads");
  config = SmallConfig();
  config.head_dim = 0;
  expect_invalid(config, "head_dim");
  config = SmallConfig();
  config.dtype = static_cast<kernels::KvDtype>(7);
  expect_invalid(config, "dtype 7");
}

TEST(KvStorageDeathTest, BadCopyOrLayerIsCaught) {
  auto storage = KvStorage::Create(SmallConfig());
  ASSERT_TRUE(storage.ok());
  const std::vector<BlockCopy> out_of_range = {{BlockId(0), BlockId(5)}};
  EXPECT_DEATH((*storage)->CopyBlocks(out_of_range), "out of range");
  const std::vector<BlockCopy> self = {{BlockId(2), BlockId(2)}};
  EXPECT_DEATH((*storage)->CopyBlocks(self), "onto itself");
  EXPECT_DEATH((*storage)->LayerView(3), "layer 3 out of range");
}

}  // namespace
}  // namespace tandem::kv
