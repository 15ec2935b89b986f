// Scalar reference twins of the AVX2 / AVX-512 quantized-dot kernels.
#include <cmath>
#include <cstdlib>

#include "kernels/quant_formats.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_kernels.h"

namespace tandem::kernels {
namespace {

void QuantizeRowRef(const float* x, int64_t n, BlockQ8A* out) {
  for (int64_t b = 0; b < n / kQ8ABlock; ++b) {
    const float* xb = x + b * kQ8ABlock;
    float amax = 0.0f;
    for (int j = 0; j < kQ8ABlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQ8ABlock; ++j) {
      int q = static_cast<int>(std::nearbyint(xb[j] * id));
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
    out[b].sum = sum;
  }
}

// Weight-type policies: the integer dot of one block and its fp32 terms.
struct Q8_0Policy {
  using Block = gguf::BlockQ8_0;
  static float Dot(const Block& w, const BlockQ8A& x) {
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += w.qs[j] * x.qs[j];
    return (gguf::Fp16ToFp32(w.d) * x.d) * static_cast<float>(isum);
  }
};

struct Q4_0Policy {
  using Block = gguf::BlockQ4_0;
  static float Dot(const Block& w, const BlockQ8A& x) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w.qs[j] & 0xf) - 8) * x.qs[j];
      isum += ((w.qs[j] >> 4) - 8) * x.qs[j + 16];
    }
    return (gguf::Fp16ToFp32(w.d) * x.d) * static_cast<float>(isum);
  }
};

struct Q4_1Policy {
  using Block = gguf::BlockQ4_1;
  static float Dot(const Block& w, const BlockQ8A& x) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (w.qs[j] & 0xf) * x.qs[j];
      isum += (w.qs[j] >> 4) * x.qs[j + 16];
    }
    return (gguf::Fp16ToFp32(w.d) * x.d) * static_cast<float>(isum) +
           gguf::Fp16ToFp32(w.m) * x.s;
  }
};

template <class P>
void TileRef(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
             int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  for (int64_t c = 0; c < num_x; ++c) {
    for (int64_t r = 0; r < num_rows; ++r) {
      const auto* wb = reinterpret_cast<const typename P::Block*>(w + r * row_bytes);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) acc += P::Dot(wb[b], x[c * nb + b]);
      y[c * ldy + r] = acc;
    }
  }
}

float DotF32Ref(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

const QuantKernels& QuantKernelsRef() {
  static const QuantKernels k{QuantizeRowRef, TileRef<Q8_0Policy>, TileRef<Q4_0Policy>,
                              TileRef<Q4_1Policy>, DotF32Ref};
  return k;
}

const QuantKernels& QuantKernelsFor(Isa isa) {
  switch (ClampIsa(isa)) {
    case Isa::kAvx512:
      return QuantKernelsAvx512();
    case Isa::kAvx2:
      return QuantKernelsAvx2();
    case Isa::kReference:
      break;
  }
  return QuantKernelsRef();
}

}  // namespace tandem::kernels
