// Read-only view of a GGUF (v2 / v3) model file: its metadata and the layout
// of its tensors, whose bytes stay in a read-only memory mapping (or an owned
// buffer). Every structural property of the file is validated at open time, so
// users can trust TensorInfo without re-checking: hostile or corrupt files give
// a clear absl::Status, never a crash, hang or outsized allocation.
#ifndef TANDEM_ENGINE_GGUF_GGUF_FILE_H_
#define TANDEM_ENGINE_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/ggml_type.h"
#include "engine/gguf/metadata_value.h"

namespace tandem::gguf {

// One tensor of the file. Validated by GgufFile: 1..4 dims, each >= 1,
// dims[0] a multiple of the type's block size, data inside the file, aligned,
// not overlapping any other tensor.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml `ne` order: dims[0] is contiguous (columns)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section; a multiple of alignment
  uint64_t num_bytes = 0;
  int64_t num_elements = 0;
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives

  int64_t cols() const { return dims.empty() ? 0 : dims[0]; }
  // Product of dims[1..]; 1 for a vector.
  int64_t rows() const;
  // Bytes of one row: cols / block_size * type_size.
  int64_t row_bytes() const;
};

// Thread-safety: immutable after Open / FromBuffer; every const method may be
// called concurrently.
class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;
  static constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
  static constexpr int kMaxDims = 4;
  static constexpr std::string_view kAlignmentKey = "general.alignment";

  // Maps `path` read-only and parses it. NotFound naming the path when it does
  // not exist; InvalidArgument "not a GGUF file" for a bad magic; Unimplemented
  // for GGUF v1; InvalidArgument / DataLoss / OutOfRange for malformed content.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a file held in memory; the GgufFile owns `bytes`. Same errors as Open.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::string bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute file offset of the data section (tensor offsets are relative to it).
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  // The whole file, file_size() bytes (the mapping or the owned buffer).
  const uint8_t* file_bytes() const { return bytes_; }
  // The path, or "<buffer>" for FromBuffer; used in messages.
  const std::string& source() const { return source_; }

  // In file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // In file order.
  const std::vector<std::pair<std::string, MetadataValue>>& metadata() const { return metadata_; }
  const MetadataValue* FindMetadata(std::string_view key) const;

  // Typed getters. NotFound naming the key when it is missing; InvalidArgument
  // naming the key, the type found and the type expected when mistyped.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  // Any integer type; OutOfRange for a uint64 above INT64_MAX.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  // float32 or float64.
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Array of any integer type; OutOfRange for a uint64 element above INT64_MAX.
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  // Array of float32 or float64 (narrowed to float).
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  // Zero-copy access to an array whose elements have `element_type`.
  absl::StatusOr<const MetadataValue::Array*> GetArray(std::string_view key,
                                                       MetadataType element_type) const;

  // For optional keys: `default_value` when the key is missing, the value when
  // present with a fitting type, the same errors as above when mistyped.
  absl::StatusOr<std::string> GetStringOr(std::string_view key, std::string default_value) const;
  absl::StatusOr<int64_t> GetIntOr(std::string_view key, int64_t default_value) const;
  absl::StatusOr<double> GetFloatOr(std::string_view key, double default_value) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool default_value) const;

 private:
  GgufFile() = default;

  // Parses bytes_[0, size_) into the members; the whole validation lives here.
  absl::Status Parse();
  absl::Status ParseMetadata(ByteReader* reader, uint64_t count);
  absl::Status ParseTensorInfos(ByteReader* reader, uint64_t count);
  absl::Status PlaceTensors();

  absl::StatusOr<const MetadataValue*> Require(std::string_view key) const;
  absl::Status WrongType(std::string_view key, const MetadataValue& value,
                         std::string_view expected) const;

  std::string source_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when bytes_ is an mmap of size_ bytes
  std::string buffer_;       // the bytes when made by FromBuffer

  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, MetadataValue>> metadata_;
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_GGUF_FILE_H_
