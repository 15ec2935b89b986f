#include "kernels/cpu/dequantize_ref.h"

#include <cstring>

#include "common/logging.h"
#include "kernels/quant_formats.h"

namespace tandem::kernels {
namespace {

using gguf::GgmlType;

void DequantQ8_0(const gguf::BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = gguf::Fp16ToFp32(b[i].d);
    for (int j = 0; j < gguf::kQK; ++j) y[i * gguf::kQK + j] = d * b[i].qs[j];
  }
}

void DequantQ4_0(const gguf::BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = gguf::Fp16ToFp32(b[i].d);
    float* out = y + i * gguf::kQK;
    for (int j = 0; j < gguf::kQK / 2; ++j) {
      out[j] = d * static_cast<float>((b[i].qs[j] & 0xf) - 8);
      out[j + gguf::kQK / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const gguf::BlockQ4_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = gguf::Fp16ToFp32(b[i].d);
    float m = gguf::Fp16ToFp32(b[i].m);
    float* out = y + i * gguf::kQK;
    for (int j = 0; j < gguf::kQK / 2; ++j) {
      out[j] = d * static_cast<float>(b[i].qs[j] & 0xf) + m;
      out[j + gguf::kQK / 2] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
    }
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K super-block: the
// first four live in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
// the last four are split into a low nibble in bytes 8..11 and two high bits
// taken from the top of bytes 0..7.
void Q4KScaleMin(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Each 64-element chunk c uses 32 bytes of qs: low nibbles are sub-block 2c,
// high nibbles sub-block 2c+1.
void DequantQ4_K(const gguf::BlockQ4_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = gguf::Fp16ToFp32(b[i].d);
    float dmin = gguf::Fp16ToFp32(b[i].dmin);
    float* out = y + i * gguf::kQKK;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = b[i].qs + chunk * 32;
      int sc0, m0, sc1, m1;
      Q4KScaleMin(b[i].scales, 2 * chunk, &sc0, &m0);
      Q4KScaleMin(b[i].scales, 2 * chunk + 1, &sc1, &m1);
      float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      for (int l = 0; l < 32; ++l) {
        out[chunk * 64 + l] = d0 * static_cast<float>(q[l] & 0xf) - mm0;
        out[chunk * 64 + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - mm1;
      }
    }
  }
}

// Each 128-element half h uses ql[64h, 64h+64), qh[32h, 32h+32) and
// scales[8h, 8h+8). Element 32k + l of the half (k = 0..3, l = 0..31) takes
// its low 4 bits from ql[l + 32(k&1)] (low nibble for k < 2, high for k >= 2)
// and its high 2 bits from bits 2k..2k+1 of qh[l]; value = d * scale * (q - 32)
// with scale index 8h + 2k + l/16.
void DequantQ6_K(const gguf::BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = gguf::Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      float* out = y + i * gguf::kQKK + 128 * h;
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          uint8_t low_byte = ql[l + 32 * (k & 1)];
          int low = k < 2 ? (low_byte & 0xf) : (low_byte >> 4);
          int high = (qh[l] >> (2 * k)) & 3;
          int q = (low | (high << 4)) - 32;
          out[32 * k + l] = d * static_cast<float>(sc[2 * k + l / 16]) * static_cast<float>(q);
        }
      }
    }
  }
}

}  // namespace

int64_t WeightBlockElems(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 1;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return gguf::kQK;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return gguf::kQKK;
    default:
      return 0;
  }
}

int64_t WeightBlockBytes(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 2;
    case GgmlType::kQ8_0:
      return sizeof(gguf::BlockQ8_0);
    case GgmlType::kQ4_0:
      return sizeof(gguf::BlockQ4_0);
    case GgmlType::kQ4_1:
      return sizeof(gguf::BlockQ4_1);
    case GgmlType::kQ4_K:
      return sizeof(gguf::BlockQ4_K);
    case GgmlType::kQ6_K:
      return sizeof(gguf::BlockQ6_K);
    default:
      return 0;
  }
}

bool IsSupportedWeightType(GgmlType type) { return WeightBlockElems(type) != 0; }

void DequantizeRowRef(GgmlType type, const void* src, int64_t n, float* dst) {
  int64_t be = WeightBlockElems(type);
  CHECK(be != 0, "unsupported weight type %d", static_cast<int>(type));
  CHECK(n % be == 0, "row length %d is not a multiple of the block size %d", n, be);
  int64_t nb = n / be;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case GgmlType::kF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = gguf::Fp16ToFp32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = gguf::Bf16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ8_0:
      return DequantQ8_0(static_cast<const gguf::BlockQ8_0*>(src), nb, dst);
    case GgmlType::kQ4_0:
      return DequantQ4_0(static_cast<const gguf::BlockQ4_0*>(src), nb, dst);
    case GgmlType::kQ4_1:
      return DequantQ4_1(static_cast<const gguf::BlockQ4_1*>(src), nb, dst);
    case GgmlType::kQ4_K:
      return DequantQ4_K(static_cast<const gguf::BlockQ4_K*>(src), nb, dst);
    case GgmlType::kQ6_K:
      return DequantQ6_K(static_cast<const gguf::BlockQ6_K*>(src), nb, dst);
    default:
      break;
  }
  CHECK(false, "unreachable weight type %d", static_cast<int>(type));
}

}  // namespace tandem::kernels
