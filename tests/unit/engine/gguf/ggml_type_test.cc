#include "kernels/ggml_type.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

struct Expected {
  GgmlType type;
  const char* name;
  int64_t block_size;
  int64_t type_size;
  bool supported;
};

TEST(GgmlTypeTest, TraitsMatchGgml) {
  const Expected kExpected[] = {
      {GgmlType::kF32, "F32", 1, 4, true},       {GgmlType::kF16, "F16", 1, 2, true},
      {GgmlType::kQ4_0, "Q4_0", 32, 18, true},   {GgmlType::kQ4_1, "Q4_1", 32, 20, true},
      {GgmlType::kQ5_0, "Q5_0", 32, 22, false},  {GgmlType::kQ5_1, "Q5_1", 32, 24, false},
      {GgmlType::kQ8_0, "Q8_0", 32, 34, true},   {GgmlType::kQ8_1, "Q8_1", 32, 36, false},
      {GgmlType::kQ2_K, "Q2_K", 256, 84, false}, {GgmlType::kQ3_K, "Q3_K", 256, 110, false},
      {GgmlType::kQ4_K, "Q4_K", 256, 144, true}, {GgmlType::kQ5_K, "Q5_K", 256, 176, false},
      {GgmlType::kQ6_K, "Q6_K", 256, 210, true}, {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
      {GgmlType::kI8, "I8", 1, 1, false},        {GgmlType::kI16, "I16", 1, 2, false},
      {GgmlType::kI32, "I32", 1, 4, false},      {GgmlType::kI64, "I64", 1, 8, false},
      {GgmlType::kF64, "F64", 1, 8, false},      {GgmlType::kBF16, "BF16", 1, 2, true},
  };
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const GgmlTypeTraits* traits = FindTypeTraits(static_cast<uint32_t>(e.type));
    ASSERT_NE(traits, nullptr);
    EXPECT_EQ(std::string(traits->name), e.name);
    EXPECT_EQ(traits->block_size, e.block_size);
    EXPECT_EQ(traits->type_size, e.type_size);
    EXPECT_EQ(traits->supported, e.supported);
    EXPECT_EQ(&TypeTraits(e.type), traits);
    EXPECT_EQ(std::string(TypeName(e.type)), e.name);
  }
}

TEST(GgmlTypeTest, UnknownRawValuesHaveNoTraits) {
  for (uint32_t raw : {4u, 5u, 16u, 23u, 29u, 31u, 39u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(FindTypeTraits(raw), nullptr) << raw;
  }
  EXPECT_EQ(std::string(TypeName(static_cast<GgmlType>(4))), "unknown");
}

TEST(GgmlTypeTest, TypeTraitsOfUnknownTypeDies) {
  EXPECT_DEATH(TypeTraits(static_cast<GgmlType>(5)), "unknown GgmlType 5");
}

}  // namespace
}  // namespace tandem::gguf
