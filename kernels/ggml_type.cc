#include "kernels/ggml_type.h"

#include <array>

#include "common/logging.h"

namespace tandem::gguf {
namespace {

struct TypeEntry {
  uint32_t raw;
  GgmlTypeTraits traits;
};

// Block geometry as ggml defines it (ggml.c type_traits). `supported` marks the
// types DequantizeRow implements.
constexpr std::array<TypeEntry, 20> kTypes = {{
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, false}},
    {7, {"Q5_1", 32, 24, false}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, false}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {30, {"BF16", 1, 2, true}},
}};

}  // namespace

const GgmlTypeTraits* FindTypeTraits(uint32_t raw_type) {
  for (const TypeEntry& entry : kTypes) {
    if (entry.raw == raw_type) return &entry.traits;
  }
  return nullptr;
}

const GgmlTypeTraits& TypeTraits(GgmlType type) {
  const GgmlTypeTraits* traits = FindTypeTraits(static_cast<uint32_t>(type));
  CHECK(traits != nullptr, "unknown GgmlType %u", static_cast<uint32_t>(type));
  return *traits;
}

const char* TypeName(GgmlType type) {
  const GgmlTypeTraits* traits = FindTypeTraits(static_cast<uint32_t>(type));
  return traits != nullptr ? traits->name : "unknown";
}

}  // namespace tandem::gguf
