// AVX2 / AVX-512 QuantKernels against the scalar reference table.
//
// Tolerances:
//  - quantize_row: bit-exact (same IEEE operations in every table).
//  - tiles: the per-block integer dots are exact in every table, so tables
//    differ only in fp32 summation order: |y - y_ref| <= 1e-5 * Σ_b |block
//    term| (each block term dw·dx·Σq·q and m·s taken in absolute value).
//  - dot_f32: |y - y_ref| <= n · 2^-23 · Σ|a·b| (two fp32 sums of n terms).
//  - Within one table a result may not depend on the tile shape: bit-exact.
//  - Packed tiles (rows interleaved by PackRows16): bit-exact against the
//    same table's plain tile.
#include "kernels/cpu/quant_kernels.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_rows16.h"

namespace tandem::kernels {
namespace {

using gguf::GgmlType;
using testing::AvailableIsas;
using testing::RandomFloats;
using testing::RandomWeights;

std::vector<BlockQ8A> Quantize(const QuantKernels& k, const std::vector<float>& x) {
  std::vector<BlockQ8A> q(x.size() / 32);
  k.quantize_row(x.data(), static_cast<int64_t>(x.size()), q.data());
  return q;
}

TEST(QuantKernelsTest, QuantizeRowIsExactAndBitIdenticalAcrossIsas) {
  std::mt19937 rng(1);
  std::vector<float> x = RandomFloats(rng, 32 * 40, -3, 3);
  for (int j = 0; j < 32; ++j) x[5 * 32 + j] = 0.0f;               // all-zero block
  for (int j = 0; j < 32; ++j) x[6 * 32 + j] *= 1e-6f;             // tiny block
  for (int j = 0; j < 32; ++j) x[7 * 32 + j] = (j % 2 ? 1 : -1) * 100.0f;  // ties at ±amax
  std::vector<BlockQ8A> ref = Quantize(QuantKernelsRef(), x);
  for (size_t b = 0; b < ref.size(); ++b) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      ASSERT_GE(ref[b].qs[j], -127);
      ASSERT_LE(std::fabs(x[b * 32 + j] - ref[b].d * ref[b].qs[j]), ref[b].d * 0.5f * 1.0001f);
      sum += ref[b].qs[j];
    }
    ASSERT_EQ(ref[b].s, ref[b].d * static_cast<float>(sum));
    ASSERT_EQ(ref[b].sum, sum);
  }
  EXPECT_EQ(ref[5].d, 0.0f);
  for (Isa isa : AvailableIsas()) {
    std::vector<BlockQ8A> got = Quantize(QuantKernelsFor(isa), x);
    ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(BlockQ8A)), 0) << IsaName(isa);
  }
}

// Σ_b |term_b| for one (weight row, activation row) pair, in double.
double AbsTermSum(GgmlType type, const uint8_t* w, const BlockQ8A* x, int64_t nb) {
  double total = 0;
  for (int64_t b = 0; b < nb; ++b) {
    float wf[32];
    DequantizeRowRef(type, w + b * WeightBlockBytes(type), 32, wf);
    for (int j = 0; j < 32; ++j) total += std::fabs(static_cast<double>(wf[j]) * x[b].d * x[b].qs[j]);
    if (type == GgmlType::kQ4_1) {
      total += std::fabs(gguf::Fp16ToFp32(reinterpret_cast<const gguf::BlockQ4_1*>(w)[b].m) * x[b].s);
    }
  }
  return total;
}

QuantTileFn TileOf(const QuantKernels& k, GgmlType type) {
  return type == GgmlType::kQ8_0 ? k.tile_q8_0 : type == GgmlType::kQ4_0 ? k.tile_q4_0 : k.tile_q4_1;
}

struct TileShape {
  int64_t rows, num_x, nb;
};

TEST(QuantKernelsTest, TilesMatchReference) {
  std::mt19937 rng(2);
  const TileShape shapes[] = {{1, 1, 1}, {5, 3, 2}, {7, 17, 18}, {37, 64, 3}, {4, 4, 48}, {9, 5, 7}};
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    for (const TileShape& s : shapes) {
      const int64_t row_bytes = s.nb * WeightBlockBytes(type) + 6;  // padded rows
      std::vector<uint8_t> w = RandomWeights(rng, type, s.rows, s.nb * 32, row_bytes);
      std::vector<float> xf = RandomFloats(rng, s.num_x * s.nb * 32, -2, 2);
      std::vector<BlockQ8A> x = Quantize(QuantKernelsRef(), xf);
      std::vector<float> ref(s.num_x * s.rows);
      TileOf(QuantKernelsRef(), type)(w.data(), row_bytes, s.rows, x.data(), s.num_x, s.nb,
                                      ref.data(), s.rows);
      for (Isa isa : AvailableIsas()) {
        QuantTileFn tile = TileOf(QuantKernelsFor(isa), type);
        std::vector<float> got(s.num_x * s.rows);
        tile(w.data(), row_bytes, s.rows, x.data(), s.num_x, s.nb, got.data(), s.rows);
        for (int64_t c = 0; c < s.num_x; ++c) {
          for (int64_t r = 0; r < s.rows; ++r) {
            const double tol =
                1e-5 * AbsTermSum(type, w.data() + r * row_bytes, x.data() + c * s.nb, s.nb);
            ASSERT_NEAR(got[c * s.rows + r], ref[c * s.rows + r], tol)
                << IsaName(isa) << " type " << static_cast<int>(type) << " rows " << s.rows
                << " x " << s.num_x << " nb " << s.nb << " r " << r << " c " << c;
          }
        }
        // One activation row and one weight row at a time: same bits.
        for (int64_t c = 0; c < s.num_x; ++c) {
          for (int64_t r = 0; r < s.rows; ++r) {
            float single;
            tile(w.data() + r * row_bytes, row_bytes, 1, x.data() + c * s.nb, 1, s.nb, &single, 1);
            ASSERT_EQ(single, got[c * s.rows + r]) << IsaName(isa) << " r " << r << " c " << c;
          }
        }
      }
    }
  }
}

// The AVX2 and AVX-512 tables share their numerics (one output per lane, the
// same fma sequence), so a machine with both gives the same bits at either
// level: TANDEM_ISA=avx2 on an AVX-512 machine reproduces its tokens.
TEST(QuantKernelsTest, Avx2AndAvx512TilesBitIdentical) {
  if (HardwareIsa() != Isa::kAvx512) GTEST_SKIP() << "needs AVX-512 beside AVX2";
  std::mt19937 rng(4);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    for (const TileShape& s : {TileShape{1, 1, 2}, TileShape{37, 5, 18}, TileShape{70, 33, 7}}) {
      const int64_t row_bytes = s.nb * WeightBlockBytes(type);
      std::vector<uint8_t> w = RandomWeights(rng, type, s.rows, s.nb * 32, row_bytes);
      std::vector<float> xf = RandomFloats(rng, s.num_x * s.nb * 32, -2, 2);
      std::vector<BlockQ8A> x = Quantize(QuantKernelsRef(), xf);
      std::vector<float> a(s.num_x * s.rows), b(s.num_x * s.rows);
      TileOf(QuantKernelsAvx2(), type)(w.data(), row_bytes, s.rows, x.data(), s.num_x, s.nb,
                                       a.data(), s.rows);
      TileOf(QuantKernelsAvx512(), type)(w.data(), row_bytes, s.rows, x.data(), s.num_x, s.nb,
                                         b.data(), s.rows);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "type " << static_cast<int>(type) << " rows " << s.rows << " x " << s.num_x;
    }
  }
}

TEST(QuantKernelsTest, Q8_0HandlesMinus128Weights) {
  std::mt19937 rng(3);
  gguf::BlockQ8_0 w[2];
  for (auto& b : w) {
    b.d = gguf::Fp32ToFp16(0.01f);
    for (int8_t& q : b.qs) q = -128;
  }
  std::vector<float> xf = RandomFloats(rng, 64, -1, 1);
  xf[3] = 1.0f;
  xf[40] = -1.0f;  // ±amax -> ±127
  std::vector<BlockQ8A> x = Quantize(QuantKernelsRef(), xf);
  float ref;
  QuantKernelsRef().tile_q8_0(reinterpret_cast<const uint8_t*>(w), sizeof(w), 1, x.data(), 1, 2,
                              &ref, 1);
  for (Isa isa : AvailableIsas()) {
    float got;
    QuantKernelsFor(isa).tile_q8_0(reinterpret_cast<const uint8_t*>(w), sizeof(w), 1, x.data(), 1,
                                   2, &got, 1);
    EXPECT_NEAR(got, ref, 1e-5 * AbsTermSum(GgmlType::kQ8_0, reinterpret_cast<const uint8_t*>(w),
                                            x.data(), 2))
        << IsaName(isa);
  }
}

TEST(QuantKernelsTest, DotF32MatchesReference) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 7, 8, 31, 64, 100, 576, 1537}) {
    std::vector<float> a = RandomFloats(rng, n), b = RandomFloats(rng, n);
    double abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(a[i] * b[i]);
    const float ref = QuantKernelsRef().dot_f32(a.data(), b.data(), n);
    for (Isa isa : AvailableIsas()) {
      const float got = QuantKernelsFor(isa).dot_f32(a.data(), b.data(), n);
      EXPECT_NEAR(got, ref, n * std::ldexp(1.0, -23) * abs_sum) << IsaName(isa) << " n " << n;
    }
  }
}

// dot_f32_x3, where an ISA has it, gives dot_f32's bits for each of its rows.
TEST(QuantKernelsTest, DotF32x3BitIdenticalToDotF32) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 7, 8, 31, 64, 100, 576, 1537}) {
    const int64_t ldb = n + 3;  // rows apart by more than n
    std::vector<float> a = RandomFloats(rng, n), b = RandomFloats(rng, 3 * ldb);
    for (Isa isa : AvailableIsas()) {
      const QuantKernels& k = QuantKernelsFor(isa);
      if (k.dot_f32_x3 == nullptr) continue;
      float out[3];
      k.dot_f32_x3(a.data(), b.data(), ldb, n, out);
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(out[c], k.dot_f32(a.data(), b.data() + c * ldb, n))
            << IsaName(isa) << " n " << n << " c " << c;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

PackedTileFn PackedTileOf(const QuantKernels& k, GgmlType type) {
  return type == GgmlType::kQ8_0   ? k.packed_q8_0
         : type == GgmlType::kQ4_0 ? k.packed_q4_0
                                   : k.packed_q4_1;
}

// Every (rows, activation rows) mix the packed tile meets: partial last
// groups, batches below, at and above the ISA's packed chunk, and a start
// row inside the matrix (a thread's range).
TEST(QuantKernelsTest, PackedTilesBitIdenticalToPlainTiles) {
  std::mt19937 rng(5);
  int checked = 0;
  for (Isa isa : AvailableIsas()) {
    const QuantKernels& k = QuantKernelsFor(isa);
    if (k.packed_q4_1 == nullptr) continue;
    for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
      EXPECT_EQ(PackedRowsUsed(isa, type), PackedTileOf(k, type) != nullptr);
      if (PackedTileOf(k, type) == nullptr) continue;
      for (const TileShape& s : {TileShape{1, 1, 1}, TileShape{5, 3, 2}, TileShape{16, 8, 18},
                                 TileShape{37, 9, 3}, TileShape{48, 17, 7}, TileShape{70, 5, 48}}) {
        const int64_t row_bytes = s.nb * WeightBlockBytes(type) + 6;  // padded rows
        std::vector<uint8_t> w = RandomWeights(rng, type, s.rows, s.nb * 32, row_bytes);
        // Extreme quants: Q8_0's -128 and +127, the 4-bit 0 and 15.
        if (type == GgmlType::kQ8_0) {
          auto* blk = reinterpret_cast<gguf::BlockQ8_0*>(w.data());
          blk->qs[0] = -128;
          blk->qs[1] = 127;
        }
        WeightView view{type, w.data(), s.rows, s.nb * 32, row_bytes};
        ASSERT_EQ(PackedRows16Bytes(view), (s.rows + 15) / 16 * s.nb * PackedBlockBytes(type));
        std::vector<uint8_t> packed(PackedRows16Bytes(view));
        PackRows16(view, packed.data());
        std::vector<float> xf = RandomFloats(rng, s.num_x * s.nb * 32, -2, 2);
        std::vector<BlockQ8A> x = Quantize(k, xf);
        std::vector<float> plain(s.num_x * s.rows), got(s.num_x * s.rows, -1.0f);
        TileOf(k, type)(w.data(), row_bytes, s.rows, x.data(), s.num_x, s.nb, plain.data(), s.rows);
        PackedTileOf(k, type)(packed.data(), s.rows, x.data(), s.num_x, s.nb, got.data(), s.rows);
        ASSERT_EQ(std::memcmp(got.data(), plain.data(), got.size() * sizeof(float)), 0)
            << IsaName(isa) << " type " << static_cast<int>(type) << " rows " << s.rows << " x "
            << s.num_x << " nb " << s.nb;
        if (s.rows > 16) {  // rows [16, rows) from the second group on
          std::vector<float> tail(s.num_x * s.rows, -1.0f);
          PackedTileOf(k, type)(packed.data() + s.nb * PackedBlockBytes(type), s.rows - 16,
                                x.data(), s.num_x, s.nb, tail.data() + 16, s.rows);
          for (int64_t c = 0; c < s.num_x; ++c) {
            for (int64_t r = 16; r < s.rows; ++r) {
              ASSERT_EQ(tail[c * s.rows + r], plain[c * s.rows + r]) << "r " << r << " c " << c;
            }
          }
        }
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no ISA with packed tiles on this CPU";
}

}  // namespace
}  // namespace tandem::kernels
