// libFuzzer target for GgufFile: any input must either be rejected with a
// status or parse into a file whose tensors all lie inside the input, whose
// supported tensors dequantize, and which GgufWriter re-serializes into a file
// that parses to the same metadata and tensors. Built by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"

namespace {

using tandem::gguf::GgufFile;
using tandem::gguf::GgufWriter;
using tandem::gguf::MetadataType;
using tandem::gguf::TensorInfo;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "gguf_fuzz invariant broken: %s\n", what);
  std::abort();
}

void TouchMetadata(const GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)value.DebugString();
    (void)file.GetString(key);
    (void)file.GetInt(key);
    (void)file.GetFloat(key);
    (void)file.GetBool(key);
    (void)file.GetStringArray(key);
    (void)file.GetIntArray(key);
    (void)file.GetFloatArray(key);
    (void)file.GetArray(key, MetadataType::kArray);
    if (file.FindMetadata(key) != &value) Fail("FindMetadata does not find a key");
  }
}

void TouchTensors(const GgufFile& file, const uint8_t* begin, size_t size) {
  for (const TensorInfo& t : file.tensors()) {
    if (file.FindTensor(t.name) != &t) Fail("FindTensor does not find a tensor");
    if (t.data < begin || t.num_bytes > size || t.data + t.num_bytes > begin + size) {
      Fail("tensor data outside the file");
    }
    if (t.rows() * t.cols() != t.num_elements) Fail("rows * cols != num_elements");
    if (static_cast<uint64_t>(t.row_bytes() * t.rows()) != t.num_bytes) Fail("row bytes");
    if (!tandem::gguf::TypeTraits(t.type).supported) continue;
    std::vector<float> row(static_cast<size_t>(t.cols()));
    if (!tandem::gguf::DequantizeRow(t.type, t.data, t.cols(), row.data()).ok()) {
      Fail("dequantizing a validated row failed");
    }
  }
}

// Metadata as bytes: compares NaN values bit for bit, where == would not.
std::string EncodeMetadata(const GgufFile& file) {
  std::string out;
  for (const auto& [key, value] : file.metadata()) {
    tandem::gguf::MetadataValue::String(key).AppendTo(&out);
    out += static_cast<char>(value.type());
    value.AppendTo(&out);
  }
  return out;
}

void CheckRewrite(const GgufFile& file) {
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.Add(key, value);
  for (const TensorInfo& t : file.tensors()) {
    if (!writer.AddTensor(t.name, t.type, t.dims,
                          std::string(reinterpret_cast<const char*>(t.data), t.num_bytes))
             .ok()) {
      Fail("GgufWriter rejected a tensor GgufFile accepted");
    }
  }
  auto again = GgufFile::FromBuffer(writer.Serialize());
  if (!again.ok()) {
    std::fprintf(stderr, "%s\n", again.status().ToString().c_str());
    Fail("re-serialized file does not parse");
  }
  if (EncodeMetadata(**again) != EncodeMetadata(file)) Fail("metadata changed by a rewrite");
  if ((*again)->alignment() != file.alignment()) Fail("alignment changed by a rewrite");
  if ((*again)->tensors().size() != file.tensors().size()) Fail("tensor count changed");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& a = file.tensors()[i];
    const TensorInfo& b = (*again)->tensors()[i];
    if (a.name != b.name || a.dims != b.dims || a.type != b.type || a.num_bytes != b.num_bytes ||
        std::string_view(reinterpret_cast<const char*>(a.data), a.num_bytes) !=
            std::string_view(reinterpret_cast<const char*>(b.data), b.num_bytes)) {
      Fail("tensor changed by a rewrite");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) {
    if (file.status().message().empty()) Fail("error without a message");
    return 0;
  }
  const GgufFile& f = **file;
  // The buffer was copied into the GgufFile; tensors must point into that copy.
  if (f.file_size() != size) Fail("file_size differs from the input size");
  TouchMetadata(f);
  TouchTensors(f, f.file_bytes(), f.file_size());
  CheckRewrite(f);
  return 0;
}
