// Plain greedy decoding with its own KV storage — prefill, then one token per
// forward, argmax of the logits — an implementation independent of the
// proposers', for tests that check drafts against a model's own continuation.
#ifndef TANDEM_TESTS_UNIT_DRAFT_GREEDY_REFERENCE_H_
#define TANDEM_TESTS_UNIT_DRAFT_GREEDY_REFERENCE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"

namespace tandem::draft::testing {

// `count` greedy tokens after `tokens` (positions past the prompt must fit
// in num_blocks blocks of block_size).
inline std::vector<int32_t> GreedyContinuation(model::Model& model, std::vector<int32_t> tokens,
                                               int32_t count, int32_t num_blocks = 64,
                                               int32_t block_size = 16) {
  const model::ModelConfig& mc = model.config();
  kv::KvStorageConfig sc{mc.num_layers, num_blocks, block_size, model.num_local_kv_heads(),
                         mc.head_dim, model.kv_dtype()};
  auto storage = kv::KvStorage::Create(sc);
  EXPECT_TRUE(storage.ok());
  if (!storage.ok()) return {};
  std::vector<BlockId> table;
  for (int32_t b = 0; b < num_blocks; ++b) table.push_back(BlockId(b));
  std::vector<float> logits(static_cast<size_t>(mc.vocab_size));
  std::vector<int32_t> out;
  int32_t pos = 0;
  while (static_cast<int32_t>(out.size()) < count) {
    model::ForwardSequence fs;
    fs.tokens = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(pos));
    fs.start_pos = pos;
    fs.block_table = table;
    EXPECT_TRUE(model.Forward(std::span<const model::ForwardSequence>(&fs, 1), **storage,
                              logits.data())
                    .ok());
    pos = static_cast<int32_t>(tokens.size());
    int32_t best = 0;
    for (int32_t i = 1; i < mc.vocab_size; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    out.push_back(best);
    tokens.push_back(best);
  }
  return out;
}

}  // namespace tandem::draft::testing

#endif  // TANDEM_TESTS_UNIT_DRAFT_GREEDY_REFERENCE_H_
