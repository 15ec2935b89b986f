// One GGUF metadata value: a scalar (uint8 .. float64, bool), a string, or an
// array of any of them (arrays may nest). Also the value's GGUF binary
// encoding, read and written, so the reader and the writer share one codec.
#ifndef TANDEM_ENGINE_GGUF_METADATA_VALUE_H_
#define TANDEM_ENGINE_GGUF_METADATA_VALUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/byte_reader.h"

namespace tandem::gguf {

// GGUF value type codes (gguf_type). The values are the on-disk tags.
enum class MetadataType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kNumMetadataTypes = 13;

// "uint8", "int32", "string", "array", ...; "unknown" for values outside the enum.
const char* MetadataTypeName(MetadataType type);
bool IsIntegerType(MetadataType type);
bool IsFloatType(MetadataType type);

// A tagged value. The variant index equals the GGUF type code.
//
// Thread-safety: immutable after construction apart from assignment; const
// methods may be called concurrently.
class MetadataValue {
 public:
  // Arrays nested deeper than this (counting the outermost array as 1) are
  // rejected by Read: bounds recursion on hostile input.
  static constexpr int kMaxArrayDepth = 8;

  struct Array {
    MetadataType element_type = MetadataType::kUint8;
    std::vector<MetadataValue> elements;  // each of type element_type
    bool operator==(const Array&) const = default;
  };

  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, Array, uint64_t, int64_t, double>;

  MetadataValue() = default;  // uint8 0
  static MetadataValue Uint8(uint8_t v) { return MetadataValue(Storage(std::in_place_index<0>, v)); }
  static MetadataValue Int8(int8_t v) { return MetadataValue(Storage(std::in_place_index<1>, v)); }
  static MetadataValue Uint16(uint16_t v) { return MetadataValue(Storage(std::in_place_index<2>, v)); }
  static MetadataValue Int16(int16_t v) { return MetadataValue(Storage(std::in_place_index<3>, v)); }
  static MetadataValue Uint32(uint32_t v) { return MetadataValue(Storage(std::in_place_index<4>, v)); }
  static MetadataValue Int32(int32_t v) { return MetadataValue(Storage(std::in_place_index<5>, v)); }
  static MetadataValue Float32(float v) { return MetadataValue(Storage(std::in_place_index<6>, v)); }
  static MetadataValue Bool(bool v) { return MetadataValue(Storage(std::in_place_index<7>, v)); }
  static MetadataValue String(std::string v) {
    return MetadataValue(Storage(std::in_place_index<8>, std::move(v)));
  }
  static MetadataValue Uint64(uint64_t v) { return MetadataValue(Storage(std::in_place_index<10>, v)); }
  static MetadataValue Int64(int64_t v) { return MetadataValue(Storage(std::in_place_index<11>, v)); }
  static MetadataValue Float64(double v) { return MetadataValue(Storage(std::in_place_index<12>, v)); }
  // An array of `element_type`. CHECKs that every element has that type (a
  // programmer bug otherwise).
  static MetadataValue MakeArray(MetadataType element_type, std::vector<MetadataValue> elements);

  MetadataType type() const { return static_cast<MetadataType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  // Exact typed access: nullptr unless the value holds a T.
  template <typename T>
  const T* GetIf() const {
    return std::get_if<T>(&storage_);
  }

  // The value of any integer type as int64; nullopt for non-integers and for
  // uint64 values above INT64_MAX.
  std::optional<int64_t> AsInt() const;
  // The value of a float32 / float64; nullopt for other types.
  std::optional<double> AsDouble() const;
  std::optional<bool> AsBool() const;
  const std::string* AsString() const { return std::get_if<std::string>(&storage_); }
  const Array* AsArray() const { return std::get_if<Array>(&storage_); }

  // Human-readable rendering for logs and error messages; strings are escaped
  // and cut after 64 characters, arrays after `max_elements` elements.
  std::string DebugString(size_t max_elements = 8) const;

  // Reads a value of `type` (its tag already consumed) at the reader's
  // position. DataLoss when the bytes run out (including string or array
  // lengths beyond the file), InvalidArgument for an unknown element type, a
  // bool byte other than 0/1 or arrays nested deeper than kMaxArrayDepth.
  // Never allocates more than a small multiple of the bytes remaining.
  static absl::StatusOr<MetadataValue> Read(ByteReader* reader, MetadataType type,
                                            int depth = 0);
  // Reads a uint32 type tag; InvalidArgument when it is not a GGUF type.
  static absl::StatusOr<MetadataType> ReadType(ByteReader* reader, std::string_view what);

  // Appends the value's encoding without its type tag (arrays: element type,
  // count, elements), the inverse of Read.
  void AppendTo(std::string* out) const;

  bool operator==(const MetadataValue&) const = default;

 private:
  explicit MetadataValue(Storage storage) : storage_(std::move(storage)) {}

  Storage storage_;
};

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_METADATA_VALUE_H_
