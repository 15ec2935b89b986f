// Tensor element types as GGUF stores them (the ggml_type enum values) and
// their block geometry. Pure data; no dependencies, so kernels can use it.
#ifndef TANDEM_KERNELS_GGML_TYPE_H_
#define TANDEM_KERNELS_GGML_TYPE_H_

#include <cstdint>

namespace tandem::gguf {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// Geometry of one type: `block_size` elements are stored in `type_size`
// bytes. `supported` is true for the types tandem can dequantize.
struct GgmlTypeTraits {
  const char* name = nullptr;
  int64_t block_size = 0;
  int64_t type_size = 0;
  bool supported = false;
};

// Traits for a raw type value read from a file; nullptr when the value is not
// a known ggml type.
const GgmlTypeTraits* FindTypeTraits(uint32_t raw_type);
// Traits of a known type (CHECKs that it is known).
const GgmlTypeTraits& TypeTraits(GgmlType type);
const char* TypeName(GgmlType type);

}  // namespace tandem::gguf

#endif  // TANDEM_KERNELS_GGML_TYPE_H_
