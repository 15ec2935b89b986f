// AVX2 + FMA + F16C kernels of QuantKernels. Compiled with -mavx2 -mfma -mf16c;
// reached only through QuantKernelsFor() when the CPU has them.
#include <immintrin.h>

#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/quant_tile_simd.h"

namespace tandem::kernels {
namespace {

struct Avx2Ops {
  static __m256i Dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    __m256i pairs = _mm256_maddubs_epi16(u8, s8);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float acc = HsumPs(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

const QuantKernels& QuantKernelsAvx2() {
  // 16 ymm registers: 2 rows × 2 activations for batches (2 × 4 spills:
  // each activation also needs its quants and scale in registers), 4 rows ×
  // 1 for the matvec.
  static const QuantKernels k{QuantizeRowSimd,
                              Tile<Q8_0Simd<Avx2Ops>, Avx2Ops, 2, 2, 4>,
                              Tile<Q4_0Simd<Avx2Ops>, Avx2Ops, 2, 2, 4>,
                              Tile<Q4_1Simd<Avx2Ops>, Avx2Ops, 2, 2, 4>,
                              DotF32Avx2};
  return k;
}

}  // namespace tandem::kernels
