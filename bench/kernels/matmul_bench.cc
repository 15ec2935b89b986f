// MatMul at the SmolLM2-135M shapes (Q4_1 projections, Q8_0 output head) for
// decode (n = 1, 16, 64), speculative verification (n = 2, 3, 4, 5, 8) and
// prefill (n = 512), per ISA, and the packed-rows path for n <= 8. Counters: GFLOP/s
// (2·rows·cols·n per call) and GB/s of weight bytes streamed (rows·row_bytes
// per call; a lower bound on traffic).
#include <cstring>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/quant_formats.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

std::vector<uint8_t> RandomWeights(gguf::GgmlType type, int64_t rows, int64_t row_bytes) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(rows * row_bytes);
  if (type == gguf::GgmlType::kF32) {  // finite, normal values
    std::uniform_real_distribution<float> dist(-1, 1);
    for (size_t i = 0; i + 4 <= data.size(); i += 4) {
      const float f = dist(rng);
      std::memcpy(data.data() + i, &f, 4);
    }
    return data;
  }
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  // Sane scales (random bits can be inf/nan halves).
  const int64_t bb = WeightBlockBytes(type);
  for (int64_t off = 0; off + bb <= static_cast<int64_t>(data.size()); off += bb) {
    uint16_t d = gguf::Fp32ToFp16(0.01f);
    std::memcpy(data.data() + off, &d, 2);
    if (type == gguf::GgmlType::kQ4_1) std::memcpy(data.data() + off + 2, &d, 2);
  }
  return data;
}

void BM_MatMul(benchmark::State& state, gguf::GgmlType type, int64_t rows, int64_t cols, Isa isa,
               bool quantize, bool packed) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  if (ClampIsa(isa) != isa) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  const int64_t row_bytes = cols / WeightBlockElems(type) * WeightBlockBytes(type);
  std::vector<uint8_t> w = RandomWeights(type, rows, row_bytes);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(n * cols), y(n * rows);
  for (float& f : x) f = dist(rng);
  WeightView view{type, w.data(), rows, cols, row_bytes};
  std::vector<uint8_t> packed_rows;
  if (packed) {
    if (!PackedRowsUsed(isa, type)) {
      state.SkipWithError("no packed tiles at this ISA");
      return;
    }
    packed_rows.resize(PackedRows16Bytes(view));
    PackRows16(view, packed_rows.data());
    view.packed = packed_rows.data();
  }
  MatMulParams params{isa, quantize};
  ThreadPool pool(threads);
  for (auto _ : state) {
    MatMul(view, x.data(), n, y.data(), params, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * iters / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(rows * row_bytes) * iters / 1e9,
                                              benchmark::Counter::kIsRate);
}

void Register() {
  struct Shape {
    const char* name;
    gguf::GgmlType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"q4_1_576x576", gguf::GgmlType::kQ4_1, 576, 576},
                          {"q4_1_192x576", gguf::GgmlType::kQ4_1, 192, 576},
                          {"q4_1_1536x576", gguf::GgmlType::kQ4_1, 1536, 576},
                          {"q4_1_576x1536", gguf::GgmlType::kQ4_1, 576, 1536},
                          {"q8_0_49152x576", gguf::GgmlType::kQ8_0, 49152, 576}};
  for (const Shape& s : shapes) {
    for (Isa isa : {Isa::kReference, Isa::kAvx2, Isa::kAvx512}) {
      std::string name = std::string("MatMul/") + s.name + "/" + IsaName(isa);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, s.type, s.rows, s.cols, isa,
                                             true, false);
      for (int threads : {1, 2}) {
        for (int64_t n : {1, 2, 3, 4, 5, 8, 16, 64, 512}) {
          if (isa == Isa::kReference && n > 16) continue;  // slow and uninteresting
          if (s.rows == 49152 && n > 64) continue;         // the head only sees decode rows
          b->Args({n, threads});
        }
      }
      b->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
    // Rows packed 16 at a time (WeightView::packed): used up to the ISA's
    // max_packed_x activation rows (AVX-512: 32; AVX2: every batch, 4-bit
    // types only).
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (isa == Isa::kAvx2 && s.type == gguf::GgmlType::kQ8_0) continue;
      std::string name = std::string("MatMul/") + s.name + "/" + IsaName(isa) + "_packed";
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, s.type, s.rows, s.cols, isa,
                                             true, true);
      for (int threads : {1, 2}) {
        for (int64_t n : {1, 2, 3, 4, 5, 8, 16, 32, 64, 512}) {
          if (isa == Isa::kAvx512 && n > 32) continue;  // past max_packed_x
          b->Args({n, threads});
        }
      }
      b->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  }
  // Reference-precision path for comparison (f32 dot of dequantized rows).
  auto* b = benchmark::RegisterBenchmark("MatMul/q4_1_576x576/avx2_f32path", BM_MatMul,
                                         gguf::GgmlType::kQ4_1, 576, 576, Isa::kAvx2, false, false);
  b->Args({1, 1})->Args({16, 1})->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
  // Reference precision proper: f32 weights (dequantized at load).
  b = benchmark::RegisterBenchmark("MatMul/f32_576x576/avx2", BM_MatMul, gguf::GgmlType::kF32, 576,
                                   576, Isa::kAvx2, false, false);
  b->Args({1, 1})->Args({16, 1})->Args({64, 1})->ArgNames({"n", "threads"});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

const int kRegistered = (Register(), 0);

}  // namespace
}  // namespace tandem::kernels
