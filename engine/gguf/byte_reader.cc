#include "engine/gguf/byte_reader.h"

#include "absl/strings/str_format.h"

namespace tandem::gguf {

absl::Status ByteReader::ReadString(std::string* out, std::string_view what) {
  uint64_t length = 0;
  if (remaining() < sizeof(length)) return Truncated(sizeof(length), what);
  std::memcpy(&length, data_ + position_, sizeof(length));
  if (length > remaining() - sizeof(length)) {
    return absl::DataLossError(absl::StrFormat(
        "%s at offset %d has length %d but only %d bytes remain in the file (size %d)", what,
        position_, length, remaining() - sizeof(length), size_));
  }
  position_ += sizeof(length);
  out->assign(reinterpret_cast<const char*>(data_ + position_), length);
  position_ += length;
  return absl::OkStatus();
}

absl::Status ByteReader::Skip(uint64_t n, std::string_view what) {
  if (remaining() < n) return Truncated(n, what);
  position_ += n;
  return absl::OkStatus();
}

absl::Status ByteReader::Truncated(uint64_t needed, std::string_view what) const {
  return absl::DataLossError(
      absl::StrFormat("truncated file: %s at offset %d needs %d bytes but only %d remain (file "
                      "size %d)",
                      what, position_, needed, remaining(), size_));
}

}  // namespace tandem::gguf
