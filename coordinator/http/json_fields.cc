#include "coordinator/http/json_fields.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace tandem::coordinator::http {

using nlohmann::json;

std::string JsonTypeName(const json& value) {
  if (value.is_boolean()) return "boolean";
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

const json* JsonFields::Get(std::string_view name) {
  known_.insert(std::string(name));
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonFields::Fail(std::string_view name, std::string message) {
  if (!error_.has_value()) error_ = FieldError{std::move(message), Path(name)};
}

void JsonFields::FailType(std::string_view name, std::string_view what, const json& got) {
  Fail(name, absl::StrFormat("'%s' must be %s, got %s", Path(name), what, JsonTypeName(got)));
}

void JsonFields::Bool(std::string_view name, bool* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_boolean()) return FailType(name, "a boolean", *v);
  *out = v->get<bool>();
}

void JsonFields::Double(std::string_view name, double* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_number()) return FailType(name, "a number", *v);
  *out = v->get<double>();
}

void JsonFields::Float(std::string_view name, float* out) {
  double d = *out;
  Double(name, &d);
  *out = static_cast<float>(d);
}

void JsonFields::Int(std::string_view name, int32_t* out, int64_t min, int64_t max) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_number_integer()) return FailType(name, "an integer", *v);
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max);
  const int64_t value = too_big ? max : v->get<int64_t>();
  if (too_big || value < min || value > max) {
    return Fail(name, absl::StrFormat("'%s' %s is out of range: must be in [%d, %d]", Path(name),
                                      v->dump(), min, max));
  }
  *out = static_cast<int32_t>(value);
}

void JsonFields::OptionalInt(std::string_view name, std::optional<int32_t>* out) {
  if (object_.contains(name) && !object_.at(std::string(name)).is_null()) {
    int32_t value = 0;
    Int(name, &value);
    if (!error_.has_value()) *out = value;
  } else {
    known_.insert(std::string(name));
  }
}

void JsonFields::Seed(std::string_view name, std::optional<uint64_t>* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_number_integer()) return FailType(name, "an integer", *v);
  *out = v->is_number_unsigned() ? v->get<uint64_t>()
                                 : static_cast<uint64_t>(v->get<int64_t>());
}

void JsonFields::String(std::string_view name, std::string* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_string()) return FailType(name, "a string", *v);
  *out = v->get<std::string>();
}

void JsonFields::Strings(std::string_view name, std::vector<std::string>* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (v->is_string()) {
    out->assign(1, v->get<std::string>());
    return;
  }
  if (!v->is_array()) return FailType(name, "a string or a list of strings", *v);
  out->clear();
  for (const json& item : *v) {
    if (!item.is_string()) return FailType(name, "a string or a list of strings", item);
    out->push_back(item.get<std::string>());
  }
}

void JsonFields::Ints(std::string_view name, std::vector<int32_t>* out) {
  const json* v = Get(name);
  if (v == nullptr || error_.has_value()) return;
  if (!v->is_array()) return FailType(name, "a list of integers", *v);
  out->clear();
  for (const json& item : *v) {
    if (!item.is_number_integer() ||
        (item.is_number_unsigned() && item.get<uint64_t>() > INT32_MAX) ||
        item.get<int64_t>() < INT32_MIN || item.get<int64_t>() > INT32_MAX) {
      return FailType(name, "a list of 32-bit integers", item);
    }
    out->push_back(item.get<int32_t>());
  }
}

std::optional<FieldError> JsonFields::Error() const {
  if (error_.has_value()) return error_;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (!known_.contains(it.key())) {
      return FieldError{absl::StrFormat("unknown field '%s'", Path(it.key())), Path(it.key())};
    }
  }
  return std::nullopt;
}

}  // namespace tandem::coordinator::http
