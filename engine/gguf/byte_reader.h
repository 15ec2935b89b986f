// Bounds-checked little-endian cursor over an untrusted byte range (a GGUF
// file). Every read either succeeds completely or returns DataLoss naming what
// was being read, the offset and the bytes missing; it never reads past the end.
//
// Thread-safety: a ByteReader is a cursor; one thread uses it at a time. It
// does not own the bytes, which must outlive it.
#ifndef TANDEM_ENGINE_GGUF_BYTE_READER_H_
#define TANDEM_ENGINE_GGUF_BYTE_READER_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"

namespace tandem::gguf {

static_assert(std::endian::native == std::endian::little,
              "GGUF values are read by memcpy; tandem supports little-endian hosts only");

// Appends `value`'s bytes to *out as GGUF stores them (little-endian, the
// host's order: see the assertion above). The writing side of ByteReader.
template <typename T>
  requires std::is_trivially_copyable_v<T>
void AppendRaw(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

class ByteReader {
 public:
  ByteReader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t position() const { return position_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - position_; }
  const uint8_t* data() const { return data_; }

  // Reads one trivially copyable little-endian value. DataLoss when fewer
  // than sizeof(T) bytes remain; `what` names the field in the message.
  template <typename T>
  absl::Status Read(T* out, std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return Truncated(sizeof(T), what);
    std::memcpy(out, data_ + position_, sizeof(T));
    position_ += sizeof(T);
    return absl::OkStatus();
  }

  // Reads a GGUF string: uint64 length then that many bytes (not
  // NUL-terminated). DataLoss when the length exceeds the bytes remaining, so
  // a hostile length never causes a large allocation.
  absl::Status ReadString(std::string* out, std::string_view what);

  // Advances by `n` bytes; DataLoss when fewer remain.
  absl::Status Skip(uint64_t n, std::string_view what);

  // The DataLoss status for needing `needed` bytes at the current position.
  absl::Status Truncated(uint64_t needed, std::string_view what) const;

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t position_ = 0;
};

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_BYTE_READER_H_
