// PagedAttention (every ISA) against naive dense causal attention over
// contiguous K/V, for mixed prefill / decode batches with random block tables
// and blocks shared between sequences, f32 and f16 caches. Unused cache slots
// hold NaN, so reading any position a query may not see poisons the output.
// Tolerance: |out - dense| <= 1e-5 (outputs are convex combinations of values
// in [-1, 1]; dense is computed in double from the values the cache holds).
// 1 and 2 threads must give identical bits, and so must a sequence run alone
// versus inside the batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

using testing::AvailableIsas;
using testing::RandomFloats;

struct SeqSpec {
  int64_t start_pos, q_len;
  int share_prefix_of = -1;  // reuse this earlier seq's K/V and blocks for full shared blocks
};

struct Fixture {
  int32_t num_heads, num_kv_heads, head_dim, block_size, num_blocks;
  KvDtype dtype;
  std::vector<float> kc, vc;  // f32 storage
  std::vector<uint16_t> kh, vh;  // f16 storage
  PagedKvView view;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> dense_k, dense_v;  // per seq [ctx, kvh, hd], as the cache holds them
  std::vector<AttentionSeq> seqs;
  std::vector<float> q;
  int64_t num_tokens = 0;
};

void Build(Fixture& f, const std::vector<SeqSpec>& specs, std::mt19937& rng) {
  const int64_t row = static_cast<int64_t>(f.num_kv_heads) * f.head_dim;
  const int64_t elems = static_cast<int64_t>(f.num_blocks) * f.block_size * row;
  f.view = {nullptr, nullptr, f.dtype, f.num_blocks, f.block_size, f.num_kv_heads, f.head_dim};
  if (f.dtype == KvDtype::kF32) {
    f.kc.assign(elems, NAN);
    f.vc.assign(elems, NAN);
    f.view.k = f.kc.data();
    f.view.v = f.vc.data();
  } else {
    f.kh.assign(elems, 0x7e00);  // f16 NaN
    f.vh.assign(elems, 0x7e00);
    f.view.k = f.kh.data();
    f.view.v = f.vh.data();
  }
  std::vector<int32_t> free_ids(f.num_blocks);
  std::iota(free_ids.begin(), free_ids.end(), 0);
  std::shuffle(free_ids.begin(), free_ids.end(), rng);
  size_t next_free = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    const int64_t ctx = specs[s].start_pos + specs[s].q_len;
    const int64_t nblocks = (ctx + f.block_size - 1) / f.block_size;
    std::vector<int32_t> table;
    std::vector<float> k = RandomFloats(rng, ctx * row), v = RandomFloats(rng, ctx * row);
    int64_t shared_blocks = 0;
    if (specs[s].share_prefix_of >= 0) {
      const int o = specs[s].share_prefix_of;
      shared_blocks = std::min<int64_t>(specs[o].start_pos + specs[o].q_len, ctx) / f.block_size;
      for (int64_t b = 0; b < shared_blocks; ++b) table.push_back(f.tables[o][b]);
      std::copy(f.dense_k[o].begin(), f.dense_k[o].begin() + shared_blocks * f.block_size * row,
                k.begin());
      std::copy(f.dense_v[o].begin(), f.dense_v[o].begin() + shared_blocks * f.block_size * row,
                v.begin());
    }
    for (int64_t b = shared_blocks; b < nblocks; ++b) table.push_back(free_ids.at(next_free++));
    // Write this sequence's own positions through WriteKv.
    std::vector<int64_t> slots;
    const int64_t first = shared_blocks * f.block_size;
    for (int64_t p = first; p < ctx; ++p) {
      slots.push_back(static_cast<int64_t>(table[p / f.block_size]) * f.block_size + p % f.block_size);
    }
    WriteKv(f.view, k.data() + first * row, v.data() + first * row, slots.data(),
            static_cast<int64_t>(slots.size()));
    if (f.dtype == KvDtype::kF16) {  // what the cache holds
      for (float& x : k) x = gguf::Fp16ToFp32(gguf::Fp32ToFp16(x));
      for (float& x : v) x = gguf::Fp16ToFp32(gguf::Fp32ToFp16(x));
    }
    f.tables.push_back(table);
    f.dense_k.push_back(k);
    f.dense_v.push_back(v);
  }
  for (size_t s = 0; s < specs.size(); ++s) {
    AttentionSeq seq;
    seq.q_begin = f.num_tokens;
    seq.q_len = specs[s].q_len;
    seq.start_pos = specs[s].start_pos;
    seq.block_table = f.tables[s].data();
    seq.num_blocks = static_cast<int64_t>(f.tables[s].size());
    f.seqs.push_back(seq);
    f.num_tokens += specs[s].q_len;
  }
  f.q = RandomFloats(rng, f.num_tokens * f.num_heads * f.head_dim, -2, 2);
}

std::vector<double> Dense(const Fixture& f, float scale) {
  const int64_t hd = f.head_dim, group = f.num_heads / f.num_kv_heads;
  std::vector<double> out(f.num_tokens * f.num_heads * hd);
  for (size_t s = 0; s < f.seqs.size(); ++s) {
    const AttentionSeq& seq = f.seqs[s];
    for (int64_t i = 0; i < seq.q_len; ++i) {
      const int64_t t = seq.q_begin + i, n_keys = seq.start_pos + i + 1;
      for (int64_t h = 0; h < f.num_heads; ++h) {
        const int64_t g = h / group;
        const float* q = f.q.data() + (t * f.num_heads + h) * hd;
        std::vector<double> sc(n_keys);
        double mx = -INFINITY;
        for (int64_t p = 0; p < n_keys; ++p) {
          const float* k = f.dense_k[s].data() + (p * f.num_kv_heads + g) * hd;
          double d = 0;
          for (int64_t j = 0; j < hd; ++j) d += static_cast<double>(q[j]) * k[j];
          sc[p] = d * scale;
          mx = std::max(mx, sc[p]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        double* o = out.data() + (t * f.num_heads + h) * hd;
        for (int64_t p = 0; p < n_keys; ++p) {
          const float* v = f.dense_v[s].data() + (p * f.num_kv_heads + g) * hd;
          for (int64_t j = 0; j < hd; ++j) o[j] += sc[p] / sum * v[j];
        }
      }
    }
  }
  return out;
}

struct Config {
  int32_t num_heads, num_kv_heads, head_dim, block_size;
  KvDtype dtype;
};

class PagedAttentionTest : public ::testing::TestWithParam<Config> {};

TEST_P(PagedAttentionTest, MatchesDenseAttention) {
  const Config c = GetParam();
  std::mt19937 rng(c.head_dim * 31 + c.block_size + static_cast<int>(c.dtype));
  Fixture f;
  f.num_heads = c.num_heads;
  f.num_kv_heads = c.num_kv_heads;
  f.head_dim = c.head_dim;
  f.block_size = c.block_size;
  f.num_blocks = 96;
  f.dtype = c.dtype;
  // prefill from 0; decode; prefill chunk mid-sequence; decode sharing seq 0's
  // prefix; a chunk sharing seq 2's prefix; a one-token prompt.
  Build(f,
        {{0, 37}, {100, 1}, {20, 9}, {50, 1, 0}, {33, 4, 2}, {0, 1}},
        rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::vector<double> dense = Dense(f, scale);
  ThreadPool pool1(1), pool2(2);
  for (Isa isa : AvailableIsas()) {
    AttentionParams params;
    params.isa = isa;
    params.num_heads = c.num_heads;
    params.scale = scale;
    std::vector<float> out1(dense.size(), NAN), out2(dense.size(), NAN);
    PagedAttention(f.q.data(), f.seqs, f.view, params, out1.data(), &pool1);
    PagedAttention(f.q.data(), f.seqs, f.view, params, out2.data(), &pool2);
    for (size_t i = 0; i < dense.size(); ++i) {
      ASSERT_NEAR(out1[i], dense[i], 1e-5) << IsaName(isa) << " element " << i;
    }
    ASSERT_EQ(0, std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float))) << IsaName(isa);
    // Batch composition: each sequence alone gives the bits it got in the batch.
    const int64_t token_elems = static_cast<int64_t>(c.num_heads) * c.head_dim;
    for (const AttentionSeq& seq : f.seqs) {
      AttentionSeq alone = seq;
      alone.q_begin = 0;
      std::vector<float> out_alone(seq.q_len * token_elems, NAN);
      PagedAttention(f.q.data() + seq.q_begin * token_elems, {&alone, 1}, f.view, params,
                     out_alone.data(), &pool2);
      ASSERT_EQ(0, std::memcmp(out_alone.data(), out1.data() + seq.q_begin * token_elems,
                               out_alone.size() * sizeof(float)))
          << IsaName(isa) << " seq at q_begin " << seq.q_begin;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionTest,
    ::testing::Values(Config{9, 3, 64, 16, KvDtype::kF32}, Config{9, 3, 64, 16, KvDtype::kF16},
                      Config{4, 4, 24, 5, KvDtype::kF32}, Config{8, 2, 128, 7, KvDtype::kF16},
                      Config{6, 1, 12, 3, KvDtype::kF32},
                      // AVX-512 grouped kernel: every (head_dim, group) it
                      // instantiates, block sizes above / below / at 16 keys.
                      Config{4, 4, 64, 37, KvDtype::kF16}, Config{8, 4, 64, 5, KvDtype::kF32},
                      Config{8, 2, 64, 16, KvDtype::kF16}, Config{4, 4, 128, 20, KvDtype::kF32},
                      Config{4, 2, 128, 16, KvDtype::kF16}, Config{16, 2, 64, 16, KvDtype::kF16}));

TEST(PagedKvTest, CopyBlocksAndF16Rounding) {
  const int32_t bs = 4, kvh = 2, hd = 8, nblocks = 5;
  const int64_t block_elems = bs * kvh * hd;
  std::vector<uint16_t> k(nblocks * block_elems, 0), v(nblocks * block_elems, 0);
  PagedKvView view{k.data(), v.data(), KvDtype::kF16, nblocks, bs, kvh, hd};
  std::mt19937 rng(5);
  std::vector<float> kr = RandomFloats(rng, kvh * hd), vr = RandomFloats(rng, kvh * hd);
  const int64_t slot = 2 * bs + 3;
  WriteKv(view, kr.data(), vr.data(), &slot, 1);
  for (int64_t i = 0; i < kvh * hd; ++i) {
    ASSERT_EQ(k[slot * kvh * hd + i], gguf::Fp32ToFp16(kr[i]));
    ASSERT_EQ(v[slot * kvh * hd + i], gguf::Fp32ToFp16(vr[i]));
  }
  const int32_t src = 2, dst = 4;
  CopyKvBlocks(view, &src, &dst, 1);
  ASSERT_EQ(0, std::memcmp(k.data() + dst * block_elems, k.data() + src * block_elems, block_elems * 2));
  ASSERT_EQ(0, std::memcmp(v.data() + dst * block_elems, v.data() + src * block_elems, block_elems * 2));
  for (int64_t i = 0; i < block_elems; ++i) ASSERT_EQ(k[block_elems + i], 0);  // others untouched
}

}  // namespace
}  // namespace tandem::kernels
