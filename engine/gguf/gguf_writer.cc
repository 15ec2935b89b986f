#include "engine/gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/gguf/byte_reader.h"
#include "engine/gguf/gguf_file.h"

namespace tandem::gguf {
namespace {

void AppendString(const std::string& s, std::string* out) {
  AppendRaw<uint64_t>(s.size(), out);
  out->append(s);
}

void PadTo(uint64_t alignment, std::string* out) {
  out->append((alignment - out->size() % alignment) % alignment, '\0');
}

uint64_t PaddedSize(uint64_t size, uint64_t alignment) {
  return (size + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::Add(std::string key, MetadataValue value) {
  for (auto& [existing_key, existing_value] : metadata_) {
    if (existing_key == key) {
      existing_value = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::AddString(std::string key, std::string value) {
  Add(std::move(key), MetadataValue::String(std::move(value)));
}
void GgufWriter::AddUint32(std::string key, uint32_t value) {
  Add(std::move(key), MetadataValue::Uint32(value));
}
void GgufWriter::AddInt32(std::string key, int32_t value) {
  Add(std::move(key), MetadataValue::Int32(value));
}
void GgufWriter::AddUint64(std::string key, uint64_t value) {
  Add(std::move(key), MetadataValue::Uint64(value));
}
void GgufWriter::AddFloat32(std::string key, float value) {
  Add(std::move(key), MetadataValue::Float32(value));
}
void GgufWriter::AddBool(std::string key, bool value) {
  Add(std::move(key), MetadataValue::Bool(value));
}

void GgufWriter::AddStringArray(std::string key, const std::vector<std::string>& values) {
  std::vector<MetadataValue> elements;
  elements.reserve(values.size());
  for (const std::string& v : values) elements.push_back(MetadataValue::String(v));
  Add(std::move(key), MetadataValue::MakeArray(MetadataType::kString, std::move(elements)));
}

void GgufWriter::AddInt32Array(std::string key, const std::vector<int32_t>& values) {
  std::vector<MetadataValue> elements;
  elements.reserve(values.size());
  for (int32_t v : values) elements.push_back(MetadataValue::Int32(v));
  Add(std::move(key), MetadataValue::MakeArray(MetadataType::kInt32, std::move(elements)));
}

void GgufWriter::AddFloat32Array(std::string key, const std::vector<float>& values) {
  std::vector<MetadataValue> elements;
  elements.reserve(values.size());
  for (float v : values) elements.push_back(MetadataValue::Float32(v));
  Add(std::move(key), MetadataValue::MakeArray(MetadataType::kFloat32, std::move(elements)));
}

absl::StatusOr<uint64_t> GgufWriter::CheckTensor(const std::string& name, GgmlType type,
                                                  const std::vector<int64_t>& dims) const {
  const GgmlTypeTraits* traits = FindTypeTraits(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' has unknown ggml type %d",
                                                      name, static_cast<uint32_t>(type)));
  }
  std::string dims_text = absl::StrFormat("{%s}", absl::StrJoin(dims, ", "));
  if (dims.empty() || dims.size() > static_cast<size_t>(GgufFile::kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has %d dims %s (expected 1..%d)", name, dims.size(), dims_text,
        GgufFile::kMaxDims));
  }
  int64_t num_elements = 1;
  for (int64_t dim : dims) {
    if (dim < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s' has dims %s with a dim %d < 1", name, dims_text, dim));
    }
    if (__builtin_mul_overflow(num_elements, dim, &num_elements)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s' dims %s overflow int64", name, dims_text));
    }
  }
  if (dims[0] % traits->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has %d columns, not a multiple of the %s block size %d", name, dims[0],
        traits->name, traits->block_size));
  }
  for (const PendingTensor& tensor : tensors_) {
    if (tensor.name == name) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s' was already added", name));
    }
  }
  return static_cast<uint64_t>(num_elements / traits->block_size) * traits->type_size;
}

absl::Status GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                                   std::string bytes) {
  ASSIGN_OR_RETURN(const uint64_t expected, CheckTensor(name, type, dims));
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' (%s, dims {%s}) needs %d bytes but was given %d", name, TypeName(type),
        absl::StrJoin(dims, ", "), expected, bytes.size()));
  }
  tensors_.push_back({std::move(name), type, std::move(dims), expected, /*has_bytes=*/true,
                      std::move(bytes)});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorInfo(std::string name, GgmlType type,
                                       std::vector<int64_t> dims) {
  ASSIGN_OR_RETURN(const uint64_t num_bytes, CheckTensor(name, type, dims));
  tensors_.push_back(
      {std::move(name), type, std::move(dims), num_bytes, /*has_bytes=*/false, std::string()});
  return absl::OkStatus();
}

uint64_t GgufWriter::TensorByteSize(size_t index) const {
  CHECK(index < tensors_.size(), "tensor index %d, only %d tensors", index, tensors_.size());
  return tensors_[index].num_bytes;
}

uint64_t GgufWriter::alignment() const {
  for (const auto& [key, value] : metadata_) {
    if (key != GgufFile::kAlignmentKey) continue;
    std::optional<int64_t> v = value.AsInt();
    if (v.has_value() && *v > 0 && (*v & (*v - 1)) == 0 &&
        static_cast<uint64_t>(*v) <= GgufFile::kMaxAlignment) {
      return static_cast<uint64_t>(*v);
    }
  }
  return GgufFile::kDefaultAlignment;
}

std::string GgufWriter::SerializeHeader() const {
  const uint64_t align = alignment();
  std::string out;
  out.append("GGUF", 4);
  AppendRaw<uint32_t>(3, &out);
  AppendRaw<uint64_t>(tensors_.size(), &out);
  AppendRaw<uint64_t>(metadata_.size(), &out);
  for (const auto& [key, value] : metadata_) {
    AppendString(key, &out);
    AppendRaw<uint32_t>(static_cast<uint32_t>(value.type()), &out);
    value.AppendTo(&out);
  }
  uint64_t offset = 0;
  for (const PendingTensor& tensor : tensors_) {
    AppendString(tensor.name, &out);
    AppendRaw<uint32_t>(static_cast<uint32_t>(tensor.dims.size()), &out);
    for (int64_t dim : tensor.dims) AppendRaw<uint64_t>(static_cast<uint64_t>(dim), &out);
    AppendRaw<uint32_t>(static_cast<uint32_t>(tensor.type), &out);
    AppendRaw<uint64_t>(offset, &out);
    offset += PaddedSize(tensor.num_bytes, align);
  }
  PadTo(align, &out);
  return out;
}

uint64_t GgufWriter::FileSize() const {
  // The header is small (metadata and tensor infos); building it is the
  // simplest way to get its exact size.
  const uint64_t align = alignment();
  uint64_t size = SerializeHeader().size();
  for (const PendingTensor& tensor : tensors_) size += PaddedSize(tensor.num_bytes, align);
  return size;
}

std::string GgufWriter::Serialize() const {
  const uint64_t align = alignment();
  std::string out = SerializeHeader();
  for (const PendingTensor& tensor : tensors_) {
    CHECK(tensor.has_bytes, "Serialize: tensor '%s' was declared by AddTensorInfo; use "
          "WriteStreaming", tensor.name);
    out.append(tensor.bytes);
    PadTo(align, &out);
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string bytes = Serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot create GGUF file '%s': %s", path, std::generic_category().message(errno)));
  }
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int write_error = std::ferror(f) ? errno : 0;
  if (std::fclose(f) != 0 || written != bytes.size()) {
    return absl::UnavailableError(absl::StrFormat(
        "wrote %d of %d bytes to GGUF file '%s': %s", written, bytes.size(), path,
        std::generic_category().message(write_error != 0 ? write_error : errno)));
  }
  return absl::OkStatus();
}

namespace {

// Owns a FILE* being written at `path`; closes it on destruction.
class StreamFile {
 public:
  static absl::StatusOr<StreamFile> Create(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot create GGUF file '%s': %s", path, std::generic_category().message(errno)));
    }
    return StreamFile(path, f);
  }
  StreamFile(StreamFile&& other) noexcept
      : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}
  StreamFile& operator=(StreamFile&&) = delete;
  ~StreamFile() {
    if (file_ != nullptr) std::fclose(file_);
  }

  absl::Status Write(std::string_view bytes) {
    if (bytes.empty()) return absl::OkStatus();
    const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), file_);
    if (written != bytes.size()) {
      return absl::UnavailableError(absl::StrFormat(
          "wrote %d of %d bytes at offset %d of GGUF file '%s': %s", written, bytes.size(),
          offset_, path_, std::generic_category().message(errno)));
    }
    offset_ += written;
    return absl::OkStatus();
  }

  absl::Status Close() {
    std::FILE* f = std::exchange(file_, nullptr);
    if (std::fclose(f) != 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot finish GGUF file '%s' after %d bytes: %s", path_, offset_,
          std::generic_category().message(errno)));
    }
    return absl::OkStatus();
  }

 private:
  StreamFile(std::string path, std::FILE* f) : path_(std::move(path)), file_(f) {}

  std::string path_;
  std::FILE* file_;
  uint64_t offset_ = 0;
};

}  // namespace

absl::Status GgufWriter::WriteStreaming(const std::string& path,
                                        const TensorProducer& produce) const {
  const std::string partial = path + ".partial";
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(StreamFile file, StreamFile::Create(partial));
    const uint64_t align = alignment();
    const std::string padding(align, '\0');
    RETURN_IF_ERROR(file.Write(SerializeHeader()));
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& tensor = tensors_[i];
      const uint64_t pad = PaddedSize(tensor.num_bytes, align) - tensor.num_bytes;
      if (tensor.has_bytes) {
        RETURN_IF_ERROR(file.Write(tensor.bytes));
      } else {
        ASSIGN_OR_RETURN(const std::string bytes, produce(i));
        if (bytes.size() != tensor.num_bytes) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "tensor %d '%s' (%s, dims {%s}) needs %d bytes but the producer gave %d", i,
              tensor.name, TypeName(tensor.type), absl::StrJoin(tensor.dims, ", "),
              tensor.num_bytes, bytes.size()));
        }
        RETURN_IF_ERROR(file.Write(bytes));
      }
      RETURN_IF_ERROR(file.Write(std::string_view(padding.data(), pad)));
    }
    return file.Close();
  }();
  if (status.ok() && std::rename(partial.c_str(), path.c_str()) != 0) {
    status = absl::UnavailableError(absl::StrFormat("cannot rename '%s' to '%s': %s", partial,
                                                    path, std::generic_category().message(errno)));
  }
  if (!status.ok()) std::remove(partial.c_str());
  return status;
}

}  // namespace tandem::gguf
