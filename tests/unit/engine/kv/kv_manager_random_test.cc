// Randomized test of KvManager against a shadow model and a simulated
// storage. Every operation is followed by CheckInvariants(), a comparison of
// each live sequence's tokens with the shadow, and a read of every live
// token through its block table from `content_` (the simulated KV: the
// token written into each slot, with the returned BlockCopy orders applied).
// That read proves copy-on-write and prefix reuse never let one sequence see
// or overwrite another's KV.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/kv_manager.h"
#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

using Tokens = std::vector<int32_t>;

struct RandomParams {
  int32_t num_blocks;
  int32_t block_size;
  bool enable_prefix_cache;
  uint64_t seed;
};

void PrintTo(const RandomParams& p, std::ostream* os) {
  *os << "{num_blocks " << p.num_blocks << ", block_size " << p.block_size << ", prefix cache "
      << p.enable_prefix_cache << ", seed " << p.seed << "}";
}

std::string ParamName(const testing::TestParamInfo<RandomParams>& info) {
  return "blocks" + std::to_string(info.param.num_blocks) + "_bs" +
         std::to_string(info.param.block_size) + (info.param.enable_prefix_cache ? "_cache" : "_nocache");
}

class KvManagerRandomTest : public testing::TestWithParam<RandomParams> {
 protected:
  static constexpr int kNumOps = 20000;
  static constexpr int kMaxLive = 12;

  KvManagerRandomTest()
      : kv_({.num_blocks = GetParam().num_blocks,
             .block_size = GetParam().block_size,
             .enable_prefix_cache = GetParam().enable_prefix_cache}),
        rng_(GetParam().seed),
        bs_(GetParam().block_size),
        content_(static_cast<size_t>(GetParam().num_blocks) * GetParam().block_size, -1) {
    // A small pool of prompt heads so prompts share prefixes; a tiny
    // vocabulary so equal blocks also occur under different prefixes.
    for (int i = 0; i < 4; ++i) {
      Tokens base(6 * bs_ + static_cast<int32_t>(Uniform(bs_)));
      for (int32_t& t : base) t = static_cast<int32_t>(Uniform(6));
      bases_.push_back(base);
    }
  }

  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  int64_t RandomLive() {
    auto it = shadow_.begin();
    std::advance(it, Uniform(shadow_.size()));
    return it->first;
  }

  void DoAdd() {
    const Tokens& base = bases_[Uniform(bases_.size())];
    Tokens prompt(base.begin(), base.begin() + Uniform(base.size() + 1));
    const uint64_t suffix = Uniform(2 * bs_ + 1);
    for (uint64_t i = 0; i < suffix; ++i) prompt.push_back(static_cast<int32_t>(Uniform(4)));
    if (prompt.empty()) prompt.push_back(1);
    const SeqId seq(next_id_++);
    const int32_t hit = kv_.AddSequence(seq, prompt);
    ASSERT_EQ(hit % bs_, 0);
    ASSERT_GE(hit, 0);
    ASSERT_LE(hit, static_cast<int32_t>(prompt.size()) - 1);
    if (!GetParam().enable_prefix_cache) {
      ASSERT_EQ(hit, 0);
    }
    hits_ += hit > 0;
    shadow_[seq.value()] = Tokens(prompt.begin(), prompt.begin() + hit);
    pending_[seq.value()] = Tokens(prompt.begin() + hit, prompt.end());
    query_tokens_ += static_cast<int64_t>(prompt.size());
    hit_tokens_ += hit;
  }

  void DoAppend() {
    const int64_t id = RandomLive();
    const SeqId seq(id);
    Tokens& pending = pending_[id];
    Tokens tokens;
    if (!pending.empty()) {
      const size_t n = std::min<size_t>(pending.size(), 1 + Uniform(3 * bs_));
      tokens.assign(pending.begin(), pending.begin() + n);
    } else {
      const uint64_t n = 1 + Uniform(2 * bs_);
      for (uint64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(Uniform(4)));
    }
    const int32_t needed = kv_.NumBlocksNeeded(seq, static_cast<int32_t>(tokens.size()));
    const int32_t available = kv_.num_free_blocks();
    const KvStats before = kv_.stats();
    const std::span<const BlockId> table = kv_.BlockTable(seq);
    const std::vector<BlockId> blocks_before(table.begin(), table.end());

    std::optional<std::vector<BlockCopy>> copies = kv_.AppendTokens(seq, tokens);
    if (!copies) {
      ++nullopts_;
      ASSERT_GT(needed, available);
      const std::span<const BlockId> after = kv_.BlockTable(seq);
      ASSERT_EQ(std::vector<BlockId>(after.begin(), after.end()), blocks_before);
      ASSERT_EQ(kv_.num_free_blocks(), available);
      ASSERT_EQ(kv_.stats().num_blocks_free, before.num_blocks_free);
      ASSERT_EQ(kv_.stats().num_blocks_cached, before.num_blocks_cached);
      // Preempt someone half of the time, as a scheduler would.
      if (Uniform(2) == 0) DoFree();
      return;
    }
    ASSERT_LE(needed, available);
    ASSERT_EQ(kv_.num_free_blocks(), available - needed);
    if (needed > before.num_blocks_free) ++evicting_appends_;
    cows_ += static_cast<int64_t>(copies->size());
    for (const BlockCopy& copy : *copies) {
      ASSERT_NE(copy.src, copy.dst);
      for (int32_t o = 0; o < bs_; ++o) {
        content_[copy.dst.value() * bs_ + o] = content_[copy.src.value() * bs_ + o];
      }
    }
    Tokens& shadow = shadow_[id];
    for (int32_t token : tokens) {
      const int32_t pos = static_cast<int32_t>(shadow.size());
      shadow.push_back(token);
      content_[kv_.Slot(seq, pos)] = token;
    }
    if (!pending.empty()) pending.erase(pending.begin(), pending.begin() + tokens.size());
  }

  void DoFork() {
    const int64_t parent = RandomLive();
    const int64_t child = next_id_++;
    kv_.Fork(SeqId(parent), SeqId(child));
    shadow_[child] = shadow_[parent];
    pending_[child] = pending_[parent];
  }

  void DoTruncate() {
    const int64_t id = RandomLive();
    Tokens& shadow = shadow_[id];
    // Mostly short rollbacks (speculative decoding), sometimes deep ones.
    int32_t keep;
    if (Uniform(2) == 0) {
      keep = static_cast<int32_t>(shadow.size()) -
             static_cast<int32_t>(std::min<uint64_t>(shadow.size(), Uniform(bs_ + 2)));
    } else {
      keep = static_cast<int32_t>(Uniform(shadow.size() + 1));
    }
    kv_.Truncate(SeqId(id), keep);
    shadow.resize(keep);
    pending_[id].clear();
  }

  void DoFree() {
    if (shadow_.empty()) return;
    const int64_t id = RandomLive();
    kv_.Free(SeqId(id));
    shadow_.erase(id);
    pending_.erase(id);
  }

  void Verify(int op) {
    absl::Status status = kv_.CheckInvariants();
    ASSERT_TRUE(status.ok()) << "after op " << op << ": " << status;
    ASSERT_EQ(kv_.num_sequences(), static_cast<int32_t>(shadow_.size()));
    for (const auto& [id, shadow] : shadow_) {
      const SeqId seq(id);
      const std::span<const int32_t> tokens = kv_.Tokens(seq);
      ASSERT_EQ(Tokens(tokens.begin(), tokens.end()), shadow) << "op " << op << " seq " << id;
      const std::span<const BlockId> table = kv_.BlockTable(seq);
      for (int32_t pos = 0; pos < static_cast<int32_t>(shadow.size()); ++pos) {
        const int64_t slot = static_cast<int64_t>(table[pos / bs_].value()) * bs_ + pos % bs_;
        ASSERT_EQ(kv_.Slot(seq, pos), slot);
        ASSERT_EQ(content_[slot], shadow[pos])
            << "op " << op << ": seq " << id << " reads a wrong token at position " << pos;
      }
    }
    const KvStats stats = kv_.stats();
    ASSERT_EQ(stats.num_blocks_free + stats.num_blocks_used + stats.num_blocks_cached,
              stats.num_blocks_total);
    ASSERT_EQ(stats.prefix_query_tokens, query_tokens_);
    ASSERT_EQ(stats.prefix_hit_tokens, hit_tokens_);
  }

  KvManager kv_;
  std::mt19937_64 rng_;
  const int32_t bs_;
  std::vector<int32_t> content_;  // [num_blocks, block_size]: token whose KV the slot holds
  std::vector<Tokens> bases_;
  std::map<int64_t, Tokens> shadow_;   // live sequence -> expected tokens
  std::map<int64_t, Tokens> pending_;  // live sequence -> prompt tokens not appended yet
  int64_t next_id_ = 1;
  int64_t query_tokens_ = 0;
  int64_t hit_tokens_ = 0;
  int64_t hits_ = 0;
  int64_t nullopts_ = 0;
  int64_t evicting_appends_ = 0;
  int64_t cows_ = 0;
};

TEST_P(KvManagerRandomTest, MatchesShadowModelAndStorageContent) {
  for (int op = 0; op < kNumOps; ++op) {
    const int live = static_cast<int>(shadow_.size());
    const uint64_t r = Uniform(100);
    if (live == 0 || (r < 15 && live < kMaxLive)) {
      DoAdd();
    } else if (r < 60) {
      DoAppend();
    } else if (r < 70 && live < kMaxLive) {
      DoFork();
    } else if (r < 85) {
      DoTruncate();
    } else {
      DoFree();
    }
    if (HasFatalFailure()) FAIL() << "at op " << op;
    Verify(op);
    if (HasFatalFailure()) FAIL() << "at op " << op;
  }
  // The interesting paths must actually have run.
  EXPECT_GT(nullopts_, 0);
  // With one-token blocks no block is ever partial, so nothing is copied.
  if (bs_ > 1) {
    EXPECT_GT(cows_, 0);
  }
  if (GetParam().enable_prefix_cache) {
    EXPECT_GT(hits_, 0);
    EXPECT_GT(evicting_appends_, 0);
  }
  RecordProperty("hits", static_cast<int>(hits_));
  std::printf("hits %ld nullopts %ld evicting appends %ld copies %ld\n",
              static_cast<long>(hits_), static_cast<long>(nullopts_),
              static_cast<long>(evicting_appends_), static_cast<long>(cows_));
}

INSTANTIATE_TEST_SUITE_P(Configs, KvManagerRandomTest,
                         testing::Values(RandomParams{48, 4, true, 1},
                                         RandomParams{24, 1, true, 2},
                                         RandomParams{20, 16, true, 3},
                                         RandomParams{40, 3, true, 4},
                                         RandomParams{32, 4, false, 5}),
                         ParamName);

}  // namespace
}  // namespace tandem::kv
