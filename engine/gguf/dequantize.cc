#include "engine/gguf/dequantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::gguf {
namespace {

// Blocks are read with memcpy: tensor data in a mapping is only as aligned as
// the file's alignment relative to the mapping, and fuzzed buffers not at all.
template <typename Block>
Block LoadBlock(const uint8_t* src, int64_t index) {
  Block block;
  std::memcpy(&block, src + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return block;
}

void DequantizeF32(const uint8_t* src, int64_t n, float* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

template <float (*kConvert)(uint16_t)>
void DequantizeHalf(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof(h));
    dst[i] = kConvert(h);
  }
}

void DequantizeQ8_0(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const BlockQ8_0 block = LoadBlock<BlockQ8_0>(src, b);
    const float d = Fp16ToFp32(block.d);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = block.qs[j] * d;
  }
}

void DequantizeQ4_0(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const BlockQ4_0 block = LoadBlock<BlockQ4_0>(src, b);
    const float d = Fp16ToFp32(block.d);
    float* y = dst + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = ((block.qs[j] & 0x0f) - 8) * d;
      y[j + kQK / 2] = ((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const BlockQ4_1 block = LoadBlock<BlockQ4_1>(src, b);
    const float d = Fp16ToFp32(block.d);
    const float m = Fp16ToFp32(block.m);
    float* y = dst + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (block.qs[j] & 0x0f) * d + m;
      y[j + kQK / 2] = (block.qs[j] >> 4) * d + m;
    }
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K super-block: the
// first four live in the low 6 bits of scales[0..7]; the last four take their
// low 4 bits from scales[8..11] and their high 2 bits from the top of
// scales[0..7].
void ScaleMinK4(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

void DequantizeQ4_K(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K block = LoadBlock<BlockQ4_K>(src, b);
    const float d = Fp16ToFp32(block.d);
    const float dmin = Fp16ToFp32(block.dmin);
    float* y = dst + b * kQKK;
    const uint8_t* q = block.qs;
    // Each 64 outputs use 32 bytes: low nibbles with one scale, high nibbles
    // with the next.
    for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      ScaleMinK4(is, block.scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = dmin * m;
      ScaleMinK4(is + 1, block.scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void DequantizeQ6_K(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K block = LoadBlock<BlockQ6_K>(src, b);
    const float d = Fp16ToFp32(block.d);
    float* y = dst + b * kQKK;
    const uint8_t* ql = block.ql;
    const uint8_t* qh = block.qh;
    const int8_t* sc = block.scales;
    // Each half (128 outputs) uses 64 ql bytes, 32 qh bytes and 8 scales.
    for (int half = 0; half < kQKK; half += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

// (int8_t) of a float as ggml does, but defined for every input: values are
// clamped to [0, 15] first (ggml's inputs never leave that range for finite x).
uint8_t TruncNibble(float v) {
  if (!(v > 0.0f)) return 0;  // also NaN
  if (v >= 15.0f) return 15;
  return static_cast<uint8_t>(v);
}

}  // namespace

absl::Status DequantizeRow(GgmlType type, const void* src, int64_t n, float* dst) {
  const GgmlTypeTraits* traits = FindTypeTraits(static_cast<uint32_t>(type));
  if (traits == nullptr || !traits->supported) {
    return absl::UnimplementedError(
        absl::StrFormat("dequantizing ggml type %s (%d) is not supported", TypeName(type),
                        static_cast<uint32_t>(type)));
  }
  if (n < 0 || n % traits->block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot dequantize %d %s values: not a non-negative multiple of the "
                        "block size %d",
                        n, traits->name, traits->block_size));
  }
  const uint8_t* bytes = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32:
      DequantizeF32(bytes, n, dst);
      break;
    case GgmlType::kF16:
      DequantizeHalf<Fp16ToFp32>(bytes, n, dst);
      break;
    case GgmlType::kBF16:
      DequantizeHalf<Bf16ToFp32>(bytes, n, dst);
      break;
    case GgmlType::kQ8_0:
      DequantizeQ8_0(bytes, n, dst);
      break;
    case GgmlType::kQ4_0:
      DequantizeQ4_0(bytes, n, dst);
      break;
    case GgmlType::kQ4_1:
      DequantizeQ4_1(bytes, n, dst);
      break;
    case GgmlType::kQ4_K:
      DequantizeQ4_K(bytes, n, dst);
      break;
    case GgmlType::kQ6_K:
      DequantizeQ6_K(bytes, n, dst);
      break;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "dequantizing ggml type %s is marked supported but has no implementation",
          traits->name));
  }
  return absl::OkStatus();
}

void QuantizeRowQ8_0(const float* x, int64_t n, BlockQ8_0* out) {
  CHECK(n >= 0 && n % kQK == 0, "n = %d is not a multiple of %d", n, kQK);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK; ++j) {
      const float q = std::round(v[j] * id);  // |q| <= 127 for finite input
      out[b].qs[j] = static_cast<int8_t>(std::isnan(q) ? 0.0f : std::clamp(q, -128.0f, 127.0f));
    }
  }
}

void QuantizeRowQ4_0(const float* x, int64_t n, BlockQ4_0* out) {
  CHECK(n >= 0 && n % kQK == 0, "n = %d is not a multiple of %d", n, kQK);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = TruncNibble(v[j] * id + 8.5f);
      const uint8_t hi = TruncNibble(v[j + kQK / 2] * id + 8.5f);
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* x, int64_t n, BlockQ4_1* out) {
  CHECK(n >= 0 && n % kQK == 0, "n = %d is not a multiple of %d", n, kQK);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      min = std::min(min, v[j]);
      max = std::max(max, v[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    out[b].m = Fp32ToFp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = TruncNibble((v[j] - min) * id + 0.5f);
      const uint8_t hi = TruncNibble((v[j + kQK / 2] - min) * id + 0.5f);
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace tandem::gguf
