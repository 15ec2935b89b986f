// Helpers shared by the kernel tests: deterministic random data and random
// weight rows of every supported type with sane scales.
#ifndef TANDEM_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ggml_type.h"
#include "kernels/quant_formats.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize_ref.h"

namespace tandem::kernels::testing {

inline std::vector<float> RandomFloats(std::mt19937& rng, int64_t n, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Random fp16 value with magnitude in [lo, hi] and random sign when `signed_`.
inline uint16_t RandomHalf(std::mt19937& rng, float lo, float hi, bool signed_) {
  std::uniform_real_distribution<float> dist(lo, hi);
  float f = dist(rng);
  if (signed_ && (rng() & 1)) f = -f;
  return gguf::Fp32ToFp16(f);
}

// `rows` random rows of `cols` elements of `type`, row_bytes apart (padding
// filled with garbage to catch reads past a row's blocks). Quantized bits are
// uniformly random; scale fields are set to moderate values.
inline std::vector<uint8_t> RandomWeights(std::mt19937& rng, gguf::GgmlType type, int64_t rows,
                                          int64_t cols, int64_t row_bytes) {
  std::vector<uint8_t> data(rows * row_bytes);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  const int64_t nb = cols / WeightBlockElems(type);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = data.data() + r * row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      switch (type) {
        case gguf::GgmlType::kF32: {
          float f = std::uniform_real_distribution<float>(-1, 1)(rng);
          std::memcpy(row + 4 * b, &f, 4);
          break;
        }
        case gguf::GgmlType::kF16: {
          uint16_t h = RandomHalf(rng, 0, 1, true);
          std::memcpy(row + 2 * b, &h, 2);
          break;
        }
        case gguf::GgmlType::kBF16: {
          uint16_t h = gguf::Fp32ToBf16(std::uniform_real_distribution<float>(-1, 1)(rng));
          std::memcpy(row + 2 * b, &h, 2);
          break;
        }
        case gguf::GgmlType::kQ8_0: {
          auto* blk = reinterpret_cast<gguf::BlockQ8_0*>(row) + b;
          blk->d = RandomHalf(rng, 1e-3f, 1e-2f, true);
          break;
        }
        case gguf::GgmlType::kQ4_0: {
          auto* blk = reinterpret_cast<gguf::BlockQ4_0*>(row) + b;
          blk->d = RandomHalf(rng, 1e-2f, 1e-1f, true);
          break;
        }
        case gguf::GgmlType::kQ4_1: {
          auto* blk = reinterpret_cast<gguf::BlockQ4_1*>(row) + b;
          blk->d = RandomHalf(rng, 1e-2f, 1e-1f, false);
          blk->m = RandomHalf(rng, 0.2f, 0.8f, true);
          break;
        }
        case gguf::GgmlType::kQ4_K: {
          auto* blk = reinterpret_cast<gguf::BlockQ4_K*>(row) + b;
          blk->d = RandomHalf(rng, 1e-3f, 3e-3f, false);
          blk->dmin = RandomHalf(rng, 1e-3f, 3e-3f, false);
          break;
        }
        case gguf::GgmlType::kQ6_K: {
          auto* blk = reinterpret_cast<gguf::BlockQ6_K*>(row) + b;
          blk->d = RandomHalf(rng, 1e-4f, 1e-3f, true);
          break;
        }
        default:
          break;
      }
    }
  }
  return data;
}

inline std::vector<Isa> AvailableIsas() {
  std::vector<Isa> isas = {Isa::kReference};
  if (static_cast<int>(HardwareIsa()) >= static_cast<int>(Isa::kAvx2)) isas.push_back(Isa::kAvx2);
  if (HardwareIsa() == Isa::kAvx512) isas.push_back(Isa::kAvx512);
  return isas;
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_
