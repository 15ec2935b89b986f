#include "engine/gguf/metadata_value.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tandem::gguf {
namespace {

constexpr const char* kTypeNames[kNumMetadataTypes] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64"};

// The fewest encoded bytes one value of `type` can take: bounds array counts by
// the bytes remaining before anything is allocated.
uint64_t MinEncodedSize(MetadataType type) {
  switch (type) {
    case MetadataType::kUint8:
    case MetadataType::kInt8:
    case MetadataType::kBool:
      return 1;
    case MetadataType::kUint16:
    case MetadataType::kInt16:
      return 2;
    case MetadataType::kUint32:
    case MetadataType::kInt32:
    case MetadataType::kFloat32:
      return 4;
    case MetadataType::kUint64:
    case MetadataType::kInt64:
    case MetadataType::kFloat64:
    case MetadataType::kString:  // uint64 length
      return 8;
    case MetadataType::kArray:  // uint32 element type + uint64 count
      return 12;
  }
  return 1;
}

template <size_t kIndex>
absl::StatusOr<MetadataValue> ReadScalar(ByteReader* reader, MetadataValue (*make)(
    std::variant_alternative_t<kIndex, MetadataValue::Storage>)) {
  std::variant_alternative_t<kIndex, MetadataValue::Storage> value{};
  RETURN_IF_ERROR(reader->Read(&value, kTypeNames[kIndex]));
  return make(value);
}

}  // namespace

const char* MetadataTypeName(MetadataType type) {
  uint32_t raw = static_cast<uint32_t>(type);
  return raw < kNumMetadataTypes ? kTypeNames[raw] : "unknown";
}

bool IsIntegerType(MetadataType type) {
  switch (type) {
    case MetadataType::kUint8:
    case MetadataType::kInt8:
    case MetadataType::kUint16:
    case MetadataType::kInt16:
    case MetadataType::kUint32:
    case MetadataType::kInt32:
    case MetadataType::kUint64:
    case MetadataType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsFloatType(MetadataType type) {
  return type == MetadataType::kFloat32 || type == MetadataType::kFloat64;
}

MetadataValue MetadataValue::MakeArray(MetadataType element_type,
                                       std::vector<MetadataValue> elements) {
  for (const MetadataValue& element : elements) {
    CHECK(element.type() == element_type, "array of %s given an element of type %s",
          MetadataTypeName(element_type), MetadataTypeName(element.type()));
  }
  return MetadataValue(
      Storage(std::in_place_index<9>, Array{element_type, std::move(elements)}));
}

std::optional<int64_t> MetadataValue::AsInt() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<double> MetadataValue::AsDouble() const {
  if (const float* f = std::get_if<float>(&storage_)) return *f;
  if (const double* d = std::get_if<double>(&storage_)) return *d;
  return std::nullopt;
}

std::optional<bool> MetadataValue::AsBool() const {
  if (const bool* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

std::string MetadataValue::DebugString(size_t max_elements) const {
  return std::visit(
      [max_elements](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          constexpr size_t kMaxChars = 64;
          if (v.size() <= kMaxChars) return absl::StrCat("\"", absl::CHexEscape(v), "\"");
          return absl::StrCat("\"", absl::CHexEscape(v.substr(0, kMaxChars)), "\"... (",
                              v.size(), " bytes)");
        } else if constexpr (std::is_same_v<T, Array>) {
          std::string out = "[";
          for (size_t i = 0; i < v.elements.size() && i < max_elements; ++i) {
            if (i > 0) out += ", ";
            out += v.elements[i].DebugString(max_elements);
          }
          if (v.elements.size() > max_elements) {
            absl::StrAppend(&out, ", ... (", v.elements.size(), " ",
                            MetadataTypeName(v.element_type), " elements)");
          }
          return out + "]";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_floating_point_v<T>) {
          return absl::StrFormat("%.9g", v);
        } else if constexpr (std::is_signed_v<T>) {
          return absl::StrCat(static_cast<int64_t>(v));
        } else {
          return absl::StrCat(static_cast<uint64_t>(v));
        }
      },
      storage_);
}

absl::StatusOr<MetadataType> MetadataValue::ReadType(ByteReader* reader, std::string_view what) {
  uint64_t offset = reader->position();
  uint32_t raw = 0;
  RETURN_IF_ERROR(reader->Read(&raw, what));
  if (raw >= kNumMetadataTypes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s at offset %d is %d, not a GGUF value type (valid: 0..%d)", what, offset, raw,
        kNumMetadataTypes - 1));
  }
  return static_cast<MetadataType>(raw);
}

absl::StatusOr<MetadataValue> MetadataValue::Read(ByteReader* reader, MetadataType type,
                                                  int depth) {
  switch (type) {
    case MetadataType::kUint8:
      return ReadScalar<0>(reader, &MetadataValue::Uint8);
    case MetadataType::kInt8:
      return ReadScalar<1>(reader, &MetadataValue::Int8);
    case MetadataType::kUint16:
      return ReadScalar<2>(reader, &MetadataValue::Uint16);
    case MetadataType::kInt16:
      return ReadScalar<3>(reader, &MetadataValue::Int16);
    case MetadataType::kUint32:
      return ReadScalar<4>(reader, &MetadataValue::Uint32);
    case MetadataType::kInt32:
      return ReadScalar<5>(reader, &MetadataValue::Int32);
    case MetadataType::kFloat32:
      return ReadScalar<6>(reader, &MetadataValue::Float32);
    case MetadataType::kUint64:
      return ReadScalar<10>(reader, &MetadataValue::Uint64);
    case MetadataType::kInt64:
      return ReadScalar<11>(reader, &MetadataValue::Int64);
    case MetadataType::kFloat64:
      return ReadScalar<12>(reader, &MetadataValue::Float64);
    case MetadataType::kBool: {
      uint64_t offset = reader->position();
      uint8_t byte = 0;
      RETURN_IF_ERROR(reader->Read(&byte, "bool"));
      if (byte > 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("bool at offset %d has byte value %d (expected 0 or 1)", offset, byte));
      }
      return Bool(byte != 0);
    }
    case MetadataType::kString: {
      std::string s;
      RETURN_IF_ERROR(reader->ReadString(&s, "string value"));
      return String(std::move(s));
    }
    case MetadataType::kArray: {
      if (depth + 1 > kMaxArrayDepth) {
        return absl::InvalidArgumentError(
            absl::StrFormat("array at offset %d is nested %d deep (limit %d)",
                            reader->position(), depth + 1, kMaxArrayDepth));
      }
      ASSIGN_OR_RETURN(MetadataType element_type, ReadType(reader, "array element type"));
      uint64_t count_offset = reader->position();
      uint64_t count = 0;
      RETURN_IF_ERROR(reader->Read(&count, "array length"));
      uint64_t min_size = MinEncodedSize(element_type);
      if (count > reader->remaining() / min_size) {
        return absl::DataLossError(absl::StrFormat(
            "array length %d at offset %d needs at least %d bytes of %s elements but only %d "
            "bytes remain",
            count, count_offset, min_size, MetadataTypeName(element_type), reader->remaining()));
      }
      std::vector<MetadataValue> elements;
      elements.reserve(count);  // bounded by remaining bytes above
      for (uint64_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(MetadataValue element, Read(reader, element_type, depth + 1));
        elements.push_back(std::move(element));
      }
      return MetadataValue(
          Storage(std::in_place_index<9>, Array{element_type, std::move(elements)}));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown metadata type %d", static_cast<uint32_t>(type)));
}

void MetadataValue::AppendTo(std::string* out) const {
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          AppendRaw<uint64_t>(v.size(), out);
          out->append(v);
        } else if constexpr (std::is_same_v<T, Array>) {
          AppendRaw<uint32_t>(static_cast<uint32_t>(v.element_type), out);
          AppendRaw<uint64_t>(v.elements.size(), out);
          for (const MetadataValue& element : v.elements) element.AppendTo(out);
        } else if constexpr (std::is_same_v<T, bool>) {
          AppendRaw<uint8_t>(v ? 1 : 0, out);
        } else {
          AppendRaw<T>(v, out);
        }
      },
      storage_);
}

}  // namespace tandem::gguf
