// AVX-512 (F/BW/VL/VNNI) kernels of QuantKernels. The integer dots use
// vpdpbusd on 256-bit registers: on Zen 4 a 512-bit op costs two 256-bit
// ones, so the win over AVX2 is one instruction instead of two per block and
// 32 registers, which allow 4 × 4 tiles. The f32 dot uses 512-bit registers.
#include <immintrin.h>

#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/quant_tile_simd.h"

namespace tandem::kernels {
namespace {

struct VnniOps {
  static __m256i Dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    return _mm256_dpbusd_epi32(acc, u8, s8);
  }
};

float DotF32Avx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  }
  if (i < n) {  // masked tail: lanes past n load as 0
    __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                           acc1);
  }
  __m512 sum = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
  // Fold through memory: GCC 12's 512->256 extract intrinsics (and
  // _mm512_reduce_add_ps) trip -Wuninitialized inside its own headers.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return HsumPs(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

}  // namespace

const QuantKernels& QuantKernelsAvx512() {
  static const QuantKernels k{QuantizeRowSimd,
                              Tile<Q8_0Simd<VnniOps>, VnniOps, 4, 4, 4>,
                              Tile<Q4_0Simd<VnniOps>, VnniOps, 4, 4, 4>,
                              Tile<Q4_1Simd<VnniOps>, VnniOps, 4, 4, 4>,
                              DotF32Avx512};
  return k;
}

}  // namespace tandem::kernels
