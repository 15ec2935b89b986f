#include "engine/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/gguf/byte_reader.h"

namespace tandem::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
// Fewest bytes a metadata entry can take: key length (8) + type (4) + a
// one-byte value. A tensor info: name length (8) + n_dims (4) + one dim (8)
// + type (4) + offset (8). Counts are bounded by the bytes remaining with these
// (DataLoss: a count the file cannot hold means a truncated or corrupt file).
constexpr uint64_t kMinMetadataEntryBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 32;

// Debian's Abseil has its own string_view type; convert at the boundary.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  return absl::Status(status.code(), absl::StrCat(AbslView(context), ": ", status.message()));
}

std::string ErrnoMessage(int error) { return std::generic_category().message(error); }

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("{", absl::StrJoin(dims, ", "), "}");
}

}  // namespace

int64_t TensorInfo::rows() const {
  int64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];  // validated: no overflow
  return rows;
}

int64_t TensorInfo::row_bytes() const {
  const GgmlTypeTraits& traits = TypeTraits(type);
  return cols() / traits.block_size * traits.type_size;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    std::string message =
        absl::StrFormat("cannot open GGUF file '%s': %s", path, ErrnoMessage(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrFormat("cannot stat GGUF file '%s': %s", path, ErrnoMessage(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrFormat("GGUF path '%s' is not a regular file", path));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->source_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* mapping = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrFormat("cannot mmap GGUF file '%s' (%d bytes): %s",
                                                    path, file->size_, ErrnoMessage(error)));
    }
    file->mapping_ = mapping;
    file->bytes_ = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);  // the mapping stays valid
  RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::string bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->source_ = "<buffer>";
  file->buffer_ = std::move(bytes);  // move first: short strings live inside the object
  file->bytes_ = reinterpret_cast<const uint8_t*>(file->buffer_.data());
  file->size_ = file->buffer_.size();
  RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::Status GgufFile::Parse() {
  ByteReader reader(bytes_, size_);
  uint32_t magic = 0;
  if (size_ < sizeof(magic)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a GGUF file: '%s' is %d bytes, shorter than the 4-byte magic \"GGUF\"", source_,
        size_));
  }
  RETURN_IF_ERROR(reader.Read(&magic, "magic"));
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a GGUF file: '%s' starts with bytes %02x %02x %02x %02x (expected \"GGUF\")",
        source_, bytes_[0], bytes_[1], bytes_[2], bytes_[3]));
  }
  RETURN_IF_ERROR(reader.Read(&version_, "version"));
  if (version_ == 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "'%s' is GGUF version 1, which is not supported (supported: 2, 3); re-convert the model",
        source_));
  }
  if (version_ != 2 && version_ != 3) {
    if (version_ > 0xffff && (version_ & 0xffff) == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "'%s' has GGUF version %d, which looks byte-swapped: big-endian GGUF files are not "
          "supported",
          source_, version_));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' has unsupported GGUF version %d (supported: 2, 3)", source_, version_));
  }
  uint64_t num_tensors = 0;
  uint64_t num_metadata = 0;
  RETURN_IF_ERROR(reader.Read(&num_tensors, "tensor count"));
  RETURN_IF_ERROR(reader.Read(&num_metadata, "metadata count"));
  if (num_tensors > reader.remaining() / kMinTensorInfoBytes) {
    return absl::DataLossError(absl::StrFormat(
        "tensor count %d is impossible: each tensor needs at least %d bytes but only %d bytes "
        "remain in '%s'",
        num_tensors, kMinTensorInfoBytes, reader.remaining(), source_));
  }
  if (num_metadata > reader.remaining() / kMinMetadataEntryBytes) {
    return absl::DataLossError(absl::StrFormat(
        "metadata count %d is impossible: each entry needs at least %d bytes but only %d bytes "
        "remain in '%s'",
        num_metadata, kMinMetadataEntryBytes, reader.remaining(), source_));
  }
  RETURN_IF_ERROR(ParseMetadata(&reader, num_metadata));
  RETURN_IF_ERROR(ParseTensorInfos(&reader, num_tensors));

  uint64_t end_of_infos = reader.position();
  // Round up to the alignment without overflow (alignment <= 2^30, size < 2^63).
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  return PlaceTensors();
}

absl::Status GgufFile::ParseMetadata(ByteReader* reader, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    std::string key;
    RETURN_IF_ERROR(reader->ReadString(&key, absl::StrCat("metadata key #", i)));
    if (auto [it, inserted] = metadata_index_.try_emplace(key, metadata_.size()); !inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "duplicate metadata key '%s' (entries #%d and #%d) in '%s'", key, it->second, i,
          source_));
    }
    std::string context = absl::StrFormat("metadata '%s' in '%s'", key, source_);
    absl::StatusOr<MetadataType> type = MetadataValue::ReadType(reader, "value type");
    if (!type.ok()) return Annotate(type.status(), context);
    absl::StatusOr<MetadataValue> value = MetadataValue::Read(reader, *type);
    if (!value.ok()) return Annotate(value.status(), context);
    metadata_.emplace_back(std::move(key), *std::move(value));
  }

  const MetadataValue* alignment = FindMetadata(kAlignmentKey);
  if (alignment != nullptr) {
    std::optional<int64_t> value = alignment->AsInt();
    if (!IsIntegerType(alignment->type())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s in '%s' has type %s, expected an integer", kAlignmentKey, source_,
                          MetadataTypeName(alignment->type())));
    }
    if (!value.has_value() || *value <= 0 || (*value & (*value - 1)) != 0 ||
        static_cast<uint64_t>(*value) > kMaxAlignment) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s in '%s' is %s, expected a power of two in [1, %d]", kAlignmentKey, source_,
          alignment->DebugString(), kMaxAlignment));
    }
    alignment_ = static_cast<uint64_t>(*value);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfos(ByteReader* reader, uint64_t count) {
  tensors_.reserve(count);  // bounded by the bytes remaining (checked in Parse)
  for (uint64_t i = 0; i < count; ++i) {
    TensorInfo info;
    RETURN_IF_ERROR(reader->ReadString(&info.name, absl::StrCat("name of tensor #", i)));
    if (auto [it, inserted] = tensor_index_.try_emplace(info.name, tensors_.size()); !inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "duplicate tensor name '%s' (tensors #%d and #%d) in '%s'", info.name, it->second, i,
          source_));
    }
    std::string what = absl::StrFormat("tensor '%s'", info.name);
    uint32_t num_dims = 0;
    RETURN_IF_ERROR(reader->Read(&num_dims, what + " dimension count"));
    if (num_dims == 0 || num_dims > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s in '%s' has %d dimensions (expected 1..%d)", what, source_, num_dims, kMaxDims));
    }
    info.num_elements = 1;
    for (uint32_t d = 0; d < num_dims; ++d) {
      uint64_t dim = 0;
      RETURN_IF_ERROR(reader->Read(&dim, what + " dimension"));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s in '%s' has dimension %d = %d (expected 1..%d)", what, source_, d,
            static_cast<int64_t>(dim), std::numeric_limits<int64_t>::max()));
      }
      info.dims.push_back(static_cast<int64_t>(dim));
      if (__builtin_mul_overflow(info.num_elements, static_cast<int64_t>(dim),
                                 &info.num_elements)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s in '%s' has dims %s whose element count overflows int64 (max %d)", what, source_,
            DimsString(info.dims), std::numeric_limits<int64_t>::max()));
      }
    }
    uint32_t raw_type = 0;
    RETURN_IF_ERROR(reader->Read(&raw_type, what + " type"));
    const GgmlTypeTraits* traits = FindTypeTraits(raw_type);
    if (traits == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s in '%s' has unknown ggml type %d", what, source_, raw_type));
    }
    info.type = static_cast<GgmlType>(raw_type);
    if (info.dims[0] % traits->block_size != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s in '%s' has %d columns (dims %s), not a multiple of the %s block size %d", what,
          source_, info.dims[0], DimsString(info.dims), traits->name, traits->block_size));
    }
    int64_t num_bytes = 0;
    if (__builtin_mul_overflow(info.num_elements / traits->block_size, traits->type_size,
                               &num_bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s in '%s' of type %s with dims %s has a byte size that overflows int64", what,
          source_, traits->name, DimsString(info.dims)));
    }
    info.num_bytes = static_cast<uint64_t>(num_bytes);
    RETURN_IF_ERROR(reader->Read(&info.offset, what + " offset"));
    tensors_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::PlaceTensors() {
  uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  for (TensorInfo& info : tensors_) {
    if (info.offset % alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' in '%s' has offset %d, not a multiple of the alignment %d", info.name,
          source_, info.offset, alignment_));
    }
    if (info.offset > data_size || info.num_bytes > data_size - info.offset) {
      return absl::DataLossError(absl::StrFormat(
          "tensor '%s' in '%s' occupies %d bytes at offset %d of the data section but it holds "
          "only %d bytes (file size %d, data at offset %d); the file is truncated or corrupt",
          info.name, source_, info.num_bytes, info.offset, data_size, size_, data_offset_));
    }
    info.data = bytes_ + data_offset_ + info.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& info : tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& next = *by_offset[i];
    if (next.offset < prev.offset + prev.num_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensors '%s' [%d, %d) and '%s' [%d, %d) overlap in '%s'", prev.name, prev.offset,
          prev.offset + prev.num_bytes, next.name, next.offset, next.offset + next.num_bytes,
          source_));
    }
  }
  return absl::OkStatus();
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(AbslView(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const MetadataValue* GgufFile::FindMetadata(std::string_view key) const {
  auto it = metadata_index_.find(AbslView(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

absl::StatusOr<const MetadataValue*> GgufFile::Require(std::string_view key) const {
  const MetadataValue* value = FindMetadata(key);
  if (value == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("metadata key '%s' not found in '%s'", key, source_));
  }
  return value;
}

absl::Status GgufFile::WrongType(std::string_view key, const MetadataValue& value,
                                 std::string_view expected) const {
  std::string found = MetadataTypeName(value.type());
  if (const MetadataValue::Array* array = value.AsArray()) {
    found = absl::StrCat("array of ", MetadataTypeName(array->element_type));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "metadata key '%s' in '%s' has type %s (value %s), expected %s", key, source_, found,
      value.DebugString(4), expected));
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  if (const std::string* s = value->AsString()) return *s;
  return WrongType(key, *value, "string");
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  if (!IsIntegerType(value->type())) return WrongType(key, *value, "an integer");
  std::optional<int64_t> v = value->AsInt();
  if (!v.has_value()) {
    return absl::OutOfRangeError(absl::StrFormat(
        "metadata key '%s' in '%s' is %s, above the int64 maximum %d", key, source_,
        value->DebugString(), std::numeric_limits<int64_t>::max()));
  }
  return *v;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  if (std::optional<double> v = value->AsDouble()) return *v;
  return WrongType(key, *value, "float32 or float64");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  if (std::optional<bool> v = value->AsBool()) return *v;
  return WrongType(key, *value, "bool");
}

absl::StatusOr<const MetadataValue::Array*> GgufFile::GetArray(std::string_view key,
                                                               MetadataType element_type) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  const MetadataValue::Array* array = value->AsArray();
  if (array == nullptr || array->element_type != element_type) {
    return WrongType(key, *value, absl::StrCat("array of ", MetadataTypeName(element_type)));
  }
  return array;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue::Array* array, GetArray(key, MetadataType::kString));
  std::vector<std::string> out;
  out.reserve(array->elements.size());
  for (const MetadataValue& element : array->elements) out.push_back(*element.AsString());
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  const MetadataValue::Array* array = value->AsArray();
  if (array == nullptr || !IsIntegerType(array->element_type)) {
    return WrongType(key, *value, "array of an integer type");
  }
  std::vector<int64_t> out;
  out.reserve(array->elements.size());
  for (size_t i = 0; i < array->elements.size(); ++i) {
    std::optional<int64_t> v = array->elements[i].AsInt();
    if (!v.has_value()) {
      return absl::OutOfRangeError(absl::StrFormat(
          "metadata key '%s' in '%s' element %d is %s, above the int64 maximum %d", key, source_,
          i, array->elements[i].DebugString(), std::numeric_limits<int64_t>::max()));
    }
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const MetadataValue* value, Require(key));
  const MetadataValue::Array* array = value->AsArray();
  if (array == nullptr || !IsFloatType(array->element_type)) {
    return WrongType(key, *value, "array of float32 or float64");
  }
  std::vector<float> out;
  out.reserve(array->elements.size());
  for (const MetadataValue& element : array->elements) {
    out.push_back(static_cast<float>(*element.AsDouble()));
  }
  return out;
}

absl::StatusOr<std::string> GgufFile::GetStringOr(std::string_view key,
                                                  std::string default_value) const {
  if (FindMetadata(key) == nullptr) return default_value;
  return GetString(key);
}

absl::StatusOr<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t default_value) const {
  if (FindMetadata(key) == nullptr) return default_value;
  return GetInt(key);
}

absl::StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double default_value) const {
  if (FindMetadata(key) == nullptr) return default_value;
  return GetFloat(key);
}

absl::StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool default_value) const {
  if (FindMetadata(key) == nullptr) return default_value;
  return GetBool(key);
}

}  // namespace tandem::gguf
