// Writes the seed corpus for gguf_fuzz into the directory argv[1]: small valid
// GGUF files covering every metadata type (nested arrays included), every
// tensor type tandem dequantizes, and a non-default alignment.
#include <cstdio>
#include <string>

#include "engine/gguf/gguf_writer.h"

namespace {

using tandem::gguf::GgmlType;
using tandem::gguf::GgufWriter;
using tandem::gguf::MetadataType;
using tandem::gguf::MetadataValue;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 37 + 11) & 0x3f);  // finite halves
  return s;
}

bool Write(const GgufWriter& writer, const std::string& dir, const char* name) {
  absl::Status status = writer.WriteFile(dir + "/" + name);
  if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return status.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;

  GgufWriter meta;
  meta.AddString("general.architecture", "llama");
  meta.Add("m.u8", MetadataValue::Uint8(1));
  meta.Add("m.i8", MetadataValue::Int8(-1));
  meta.Add("m.u16", MetadataValue::Uint16(2));
  meta.Add("m.i16", MetadataValue::Int16(-2));
  meta.AddUint32("m.u32", 3);
  meta.AddInt32("m.i32", -3);
  meta.AddFloat32("m.f32", 0.5f);
  meta.AddBool("m.bool", true);
  meta.AddUint64("m.u64", 4);
  meta.Add("m.i64", MetadataValue::Int64(-4));
  meta.Add("m.f64", MetadataValue::Float64(0.25));
  meta.AddStringArray("m.strings", {"a", "bc"});
  meta.AddInt32Array("m.ints", {1, 2, 3});
  meta.AddFloat32Array("m.floats", {1.0f, 2.0f});
  meta.Add("m.nested", MetadataValue::MakeArray(
                           MetadataType::kArray,
                           {MetadataValue::MakeArray(MetadataType::kUint16,
                                                     {MetadataValue::Uint16(5)})}));
  ok &= Write(meta, dir, "metadata.gguf");

  GgufWriter tensors;
  tensors.AddUint32("llama.block_count", 1);
  struct Spec {
    const char* name;
    GgmlType type;
    int64_t cols;
    int64_t bytes_per_row;
  } specs[] = {{"f32", GgmlType::kF32, 4, 16},      {"f16", GgmlType::kF16, 4, 8},
               {"bf16", GgmlType::kBF16, 4, 8},     {"q8_0", GgmlType::kQ8_0, 32, 34},
               {"q4_0", GgmlType::kQ4_0, 32, 18},   {"q4_1", GgmlType::kQ4_1, 32, 20},
               {"q4_k", GgmlType::kQ4_K, 256, 144}, {"q6_k", GgmlType::kQ6_K, 256, 210}};
  for (const Spec& s : specs) {
    absl::Status status = tensors.AddTensor(s.name, s.type, {s.cols, 2}, Pattern(2 * s.bytes_per_row));
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
  }
  ok &= Write(tensors, dir, "tensors.gguf");

  GgufWriter aligned;
  aligned.AddUint32("general.alignment", 64);
  if (!aligned.AddTensor("a", GgmlType::kF32, {3}, Pattern(12)).ok() ||
      !aligned.AddTensor("b", GgmlType::kQ8_0, {32}, Pattern(34)).ok()) {
    return 1;
  }
  ok &= Write(aligned, dir, "aligned.gguf");
  return ok ? 0 : 1;
}
