// PagedAttention decode: `batch` sequences, one query token each, context 512,
// SmolLM2-135M head geometry (9 query heads, 3 KV heads, head_dim 64), block
// size 16, f32 and f16 caches. GB/s counts the K/V bytes each call must read.
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

void BM_PagedAttentionDecode(benchmark::State& state, Isa isa, KvDtype dtype) {
  const int64_t batch = state.range(0), ctx = 512;
  const int threads = static_cast<int>(state.range(1));
  if (ClampIsa(isa) != isa) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  const int32_t heads = 9, kv_heads = 3, hd = 64, bs = 16;
  const int32_t blocks_per_seq = ctx / bs;
  const int32_t num_blocks = static_cast<int32_t>(batch) * blocks_per_seq;
  const int64_t elem = dtype == KvDtype::kF32 ? 4 : 2;
  const int64_t cache_bytes = static_cast<int64_t>(num_blocks) * bs * kv_heads * hd * elem;
  std::vector<uint8_t> k(cache_bytes), v(cache_bytes);
  std::mt19937 rng(1);
  // Small random values in either dtype: f16 0x2000..0x2fff, f32 from bytes.
  for (int64_t i = 0; i < cache_bytes / 2; ++i) {
    uint16_t h = static_cast<uint16_t>(0x2000 + (rng() & 0x0fff));
    if (dtype == KvDtype::kF32) h = static_cast<uint16_t>(i % 2 ? 0x3c00 + (rng() & 0xff) : rng());
    std::memcpy(k.data() + 2 * i, &h, 2);
    std::memcpy(v.data() + 2 * i, &h, 2);
  }
  PagedKvView view{k.data(), v.data(), dtype, num_blocks, bs, kv_heads, hd};
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<AttentionSeq> seqs(batch);
  for (int64_t s = 0; s < batch; ++s) {
    seqs[s] = {s, 1, ctx - 1, ids.data() + s * blocks_per_seq, blocks_per_seq};
  }
  std::vector<float> q(batch * heads * hd, 0.1f), out(batch * heads * hd);
  AttentionParams params{isa, heads, 0.125f};
  ThreadPool pool(threads);
  for (auto _ : state) {
    PagedAttention(q.data(), seqs, view, params, out.data(), &pool);
    benchmark::DoNotOptimize(out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  const double flops = 4.0 * batch * heads * ctx * hd;  // QK and PV
  state.counters["GFLOP/s"] = benchmark::Counter(flops * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(2.0 * batch * ctx * kv_heads * hd * elem * iters / 1e9,
                                              benchmark::Counter::kIsRate);
}

void Register() {
  for (Isa isa : {Isa::kReference, Isa::kAvx2, Isa::kAvx512}) {
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16}) {
      std::string name = std::string("PagedAttentionDecode/ctx512/") + IsaName(isa) +
                         (dtype == KvDtype::kF32 ? "/f32" : "/f16");
      benchmark::RegisterBenchmark(name.c_str(), BM_PagedAttentionDecode, isa, dtype)
          ->Args({1, 1})->Args({16, 1})->Args({16, 2})
          ->ArgNames({"batch", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  }
}

const int kRegistered = (Register(), 0);

}  // namespace
}  // namespace tandem::kernels
