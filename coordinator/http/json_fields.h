// JsonFields: typed reads of one JSON object's fields, for request bodies.
// Each read marks its field as known; a field that is absent or null leaves
// the target unchanged. The first error (a wrong type, an integer out of
// range) is kept, naming the field by its path ("stream_options.include_usage")
// and what it must be; later reads do nothing. UnknownFieldError then names a
// field nothing read.
//
// Thread-safety: none (one request's parse).
#ifndef TANDEM_COORDINATOR_HTTP_JSON_FIELDS_H_
#define TANDEM_COORDINATOR_HTTP_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "nlohmann/json.hpp"

namespace tandem::coordinator::http {

// Why a field was refused: a message naming it, and its path.
struct FieldError {
  std::string message;
  std::string path;
};

class JsonFields {
 public:
  // `object` must be a JSON object and outlive this; `prefix` ("" or
  // "stream_options.") is put before field names in errors.
  explicit JsonFields(const nlohmann::json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}
  // A temporary would dangle.
  explicit JsonFields(nlohmann::json&& object, std::string prefix = "") = delete;

  // The field's value, marked known; null when absent or JSON null.
  const nlohmann::json* Get(std::string_view name);

  void Bool(std::string_view name, bool* out);
  void Float(std::string_view name, float* out);
  void Double(std::string_view name, double* out);
  // An integer in [min, max] (JSON numbers with a fraction are refused).
  void Int(std::string_view name, int32_t* out, int64_t min = INT32_MIN, int64_t max = INT32_MAX);
  void OptionalInt(std::string_view name, std::optional<int32_t>* out);
  // Any 64-bit integer, negative ones as their two's complement.
  void Seed(std::string_view name, std::optional<uint64_t>* out);
  void String(std::string_view name, std::string* out);
  // A string or a list of strings.
  void Strings(std::string_view name, std::vector<std::string>* out);
  void Ints(std::string_view name, std::vector<int32_t>* out);

  // Records `message` about field `name` unless an error is kept already.
  void Fail(std::string_view name, std::string message);
  // The type error for `name`: "'NAME' must be WHAT, got TYPE".
  void FailType(std::string_view name, std::string_view what, const nlohmann::json& got);
  // The first error, or else a field of the object that nothing read.
  std::optional<FieldError> Error() const;
  std::string Path(std::string_view name) const { return prefix_ + std::string(name); }

 private:
  const nlohmann::json& object_;
  const std::string prefix_;
  absl::flat_hash_set<std::string> known_;
  std::optional<FieldError> error_;
};

// The JSON type name of `value` as errors say it: "string", "number", ...
std::string JsonTypeName(const nlohmann::json& value);

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_JSON_FIELDS_H_
