#include "client/json_request.h"

#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/str_format.h"
#include "draft/api/speculative_spec.h"
#include "nlohmann/json.hpp"

namespace tandem::client {
namespace {

using nlohmann::json;

absl::Status TypeError(const std::string& key, const char* expected, const json& value) {
  return absl::InvalidArgumentError(absl::StrFormat("field \"%s\" must be %s, got %s", key,
                                                    expected, value.dump()));
}

absl::StatusOr<int64_t> GetInt(const std::string& key, const json& v) {
  if (!v.is_number_integer()) return TypeError(key, "an integer", v);
  // nlohmann keeps integers past INT64_MAX as uint64; get<int64_t>() would
  // wrap them to negative values (18446744073709551615 → -1).
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field \"%s\" = %u does not fit in 32 bits", key, v.get<uint64_t>()));
  }
  return v.get<int64_t>();
}

absl::StatusOr<int32_t> GetInt32(const std::string& key, const json& v) {
  absl::StatusOr<int64_t> i = GetInt(key, v);
  if (!i.ok()) return i.status();
  if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field \"%s\" = %d does not fit in 32 bits", key, *i));
  }
  return static_cast<int32_t>(*i);
}

absl::StatusOr<double> GetDouble(const std::string& key, const json& v) {
  if (!v.is_number()) return TypeError(key, "a number", v);
  return v.get<double>();
}

absl::StatusOr<float> GetFloat(const std::string& key, const json& v) {
  absl::StatusOr<double> d = GetDouble(key, v);
  if (!d.ok()) return d.status();
  return static_cast<float>(*d);
}

absl::StatusOr<bool> GetBool(const std::string& key, const json& v) {
  if (!v.is_boolean()) return TypeError(key, "true or false", v);
  return v.get<bool>();
}

absl::StatusOr<std::vector<int32_t>> GetIntList(const std::string& key, const json& v) {
  if (!v.is_array()) return TypeError(key, "an array of integers", v);
  std::vector<int32_t> out;
  for (const json& e : v) {
    if (!e.is_number_integer()) return TypeError(key, "an array of integers", v);
    // Unsigned: nlohmann's type for integers past INT64_MAX, which
    // get<int64_t>() would wrap to negative values.
    const bool fits =
        e.is_number_unsigned()
            ? e.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
            : e.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                  e.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "field \"%s\" has token id %s, which does not fit in 32 bits", key, e.dump()));
    }
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return out;
}

// Stores `value` in `out`, or returns its error.
template <typename T, typename U>
absl::Status Store(absl::StatusOr<T> value, U& out) {
  if (!value.ok()) return value.status();
  out = *std::move(value);
  return absl::OkStatus();
}

// What a request line's fields fill in: the request, and the beam
// parameters (they become request.beam once every field is read).
struct RequestFields {
  JsonRequest request;
  coordinator::BeamSearchParams beam;
};

// Reads the value `v` of the field named `key` into `fields`; errors name
// the field.
using FieldReader = absl::Status (*)(const std::string& key, const json& v,
                                     RequestFields& fields);

// A numeric field of SamplingParams (`kMember`: an int32_t or a float).
template <auto kMember>
absl::Status ParamsField(const std::string& key, const json& v, RequestFields& fields) {
  auto& out = fields.request.params.*kMember;
  if constexpr (std::is_same_v<std::remove_reference_t<decltype(out)>, float>) {
    return Store(GetFloat(key, v), out);
  } else {
    return Store(GetInt32(key, v), out);
  }
}

// A numeric field of BeamSearchParams (`kMember`: an int32_t or a double).
template <auto kMember>
absl::Status BeamField(const std::string& key, const json& v, RequestFields& fields) {
  auto& out = fields.beam.*kMember;
  if constexpr (std::is_same_v<std::remove_reference_t<decltype(out)>, double>) {
    return Store(GetDouble(key, v), out);
  } else {
    return Store(GetInt32(key, v), out);
  }
}

absl::Status ReadPrompt(const std::string& key, const json& v, RequestFields& fields) {
  if (!v.is_string()) return TypeError(key, "a string", v);
  fields.request.prompt = v.get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadMessages(const std::string& key, const json& v, RequestFields& fields) {
  if (!v.is_array()) return TypeError(key, "an array of {role, content}", v);
  for (const json& m : v) {
    if (!m.is_object() || !m.contains("role") || !m.contains("content") ||
        !m["role"].is_string() || !m["content"].is_string()) {
      return TypeError(key, "an array of {role, content} strings", v);
    }
    fields.request.messages.push_back(
        {m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return absl::OkStatus();
}

absl::Status ReadPromptTokenIds(const std::string& key, const json& v, RequestFields& fields) {
  return Store(GetIntList(key, v), fields.request.prompt_token_ids);
}

absl::Status ReadSeed(const std::string& key, const json& v, RequestFields& fields) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return TypeError(key, "a non-negative integer", v);
  }
  fields.request.params.seed = v.get<uint64_t>();
  return absl::OkStatus();
}

// "stop": one string or an array of them; replaces the defaults' stops.
absl::Status ReadStop(const std::string& key, const json& v, RequestFields& fields) {
  std::vector<std::string>& stop = fields.request.params.stop;
  stop.clear();
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
    return absl::OkStatus();
  }
  if (!v.is_array()) return TypeError(key, "a string or an array of strings", v);
  for (const json& s : v) {
    if (!s.is_string()) return TypeError(key, "a string or an array of strings", v);
    stop.push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadStopTokenIds(const std::string& key, const json& v, RequestFields& fields) {
  return Store(GetIntList(key, v), fields.request.params.stop_token_ids);
}

absl::Status ReadIgnoreEos(const std::string& key, const json& v, RequestFields& fields) {
  return Store(GetBool(key, v), fields.request.params.ignore_eos);
}

absl::Status ReadPriority(const std::string& key, const json& v, RequestFields& fields) {
  return Store(GetInt32(key, v), fields.request.priority);
}

absl::Status ReadNumSpeculativeTokens(const std::string& key, const json& v,
                                      RequestFields& fields) {
  absl::StatusOr<int32_t> n = GetInt32(key, v);
  if (!n.ok()) return n.status();
  if (*n < 0 || *n > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_speculative_tokens %d is out of range: must be in [0, 64] (0 = off)", *n));
  }
  fields.request.num_speculative_tokens = *n;
  return absl::OkStatus();
}

absl::Status ReadDraft(const std::string& key, const json& v, RequestFields& fields) {
  if (!v.is_string()) return TypeError(key, "a draft kind", v);
  fields.request.draft = v.get<std::string>();
  return draft::ValidateRequestedDraft(fields.request.draft);
}

absl::Status ReadDoSample(const std::string& key, const json& v, RequestFields& fields) {
  return Store(GetBool(key, v), fields.beam.do_sample);
}

// "early_stopping": true, false or "never".
absl::Status ReadEarlyStopping(const std::string& key, const json& v, RequestFields& fields) {
  if (v.is_boolean()) {
    fields.beam.early_stopping =
        v.get<bool>() ? coordinator::EarlyStopping::kTrue : coordinator::EarlyStopping::kFalse;
  } else if (v.is_string() && v.get<std::string>() == "never") {
    fields.beam.early_stopping = coordinator::EarlyStopping::kNever;
  } else {
    return TypeError(key, "true, false or \"never\"", v);
  }
  return absl::OkStatus();
}

using sampling::SamplingParams;
using coordinator::BeamSearchParams;

// Every field a request line may have (vLLM's names; transformers' for beam
// search), with its reader.
constexpr std::pair<std::string_view, FieldReader> kFieldReaders[] = {
    {"prompt", ReadPrompt},
    {"messages", ReadMessages},
    {"prompt_token_ids", ReadPromptTokenIds},
    {"max_tokens", ParamsField<&SamplingParams::max_tokens>},
    {"min_tokens", ParamsField<&SamplingParams::min_tokens>},
    {"temperature", ParamsField<&SamplingParams::temperature>},
    {"top_k", ParamsField<&SamplingParams::top_k>},
    {"top_p", ParamsField<&SamplingParams::top_p>},
    {"min_p", ParamsField<&SamplingParams::min_p>},
    {"repetition_penalty", ParamsField<&SamplingParams::repetition_penalty>},
    {"presence_penalty", ParamsField<&SamplingParams::presence_penalty>},
    {"frequency_penalty", ParamsField<&SamplingParams::frequency_penalty>},
    {"seed", ReadSeed},
    {"n", ParamsField<&SamplingParams::n>},
    {"logprobs", ParamsField<&SamplingParams::logprobs>},
    {"top_logprobs", ParamsField<&SamplingParams::logprobs>},
    {"prompt_logprobs", ParamsField<&SamplingParams::prompt_logprobs>},
    {"stop", ReadStop},
    {"stop_token_ids", ReadStopTokenIds},
    {"ignore_eos", ReadIgnoreEos},
    {"priority", ReadPriority},
    {"num_speculative_tokens", ReadNumSpeculativeTokens},
    {"draft", ReadDraft},
    {"num_beams", BeamField<&BeamSearchParams::num_beams>},
    {"num_beam_groups", BeamField<&BeamSearchParams::num_beam_groups>},
    {"num_return_sequences", BeamField<&BeamSearchParams::num_return_sequences>},
    {"min_new_tokens", ParamsField<&SamplingParams::min_tokens>},
    {"length_penalty", BeamField<&BeamSearchParams::length_penalty>},
    {"diversity_penalty", BeamField<&BeamSearchParams::diversity_penalty>},
    {"do_sample", ReadDoSample},
    {"early_stopping", ReadEarlyStopping},
};

// The reader of the field named `key`; null for an unknown field.
FieldReader FindFieldReader(std::string_view key) {
  for (const auto& [name, reader] : kFieldReaders) {
    if (name == key) return reader;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<coordinator::EarlyStopping> ParseEarlyStopping(const std::string& text) {
  if (text == "true" || text == "True") return coordinator::EarlyStopping::kTrue;
  if (text == "false" || text == "False") return coordinator::EarlyStopping::kFalse;
  if (text == "never") return coordinator::EarlyStopping::kNever;
  return absl::InvalidArgumentError(absl::StrFormat(
      "early_stopping '%s' is invalid: must be true, false or \"never\"", text));
}

JsonRequest RequestFromFlags(const std::optional<std::string>& prompt,
                             const std::optional<std::vector<int32_t>>& prompt_ids,
                             const std::optional<std::string>& chat,
                             const sampling::SamplingParams& params,
                             const coordinator::BeamSearchParams& beam) {
  JsonRequest r;
  r.params = params;
  r.beam = BeamIfRequested(beam);
  if (prompt) r.prompt = *prompt;
  if (prompt_ids) r.prompt_token_ids = *prompt_ids;
  if (chat) r.messages.push_back({"user", *chat});
  return r;
}

std::optional<coordinator::BeamSearchParams> BeamIfRequested(
    const coordinator::BeamSearchParams& beam) {
  if (beam.num_beams > 1 || beam.num_beam_groups > 1) return beam;
  return std::nullopt;
}

absl::StatusOr<JsonRequest> ParseJsonRequest(const std::string& line,
                                             const sampling::SamplingParams& defaults,
                                             const coordinator::BeamSearchParams& beam_defaults) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("request line is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("request line must be a JSON object");
  RequestFields fields;
  fields.request.params = defaults;
  fields.beam = beam_defaults;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const FieldReader read = FindFieldReader(it.key());
    if (read == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown request field \"%s\"", it.key()));
    }
    if (absl::Status s = read(it.key(), it.value(), fields); !s.ok()) return s;
  }
  JsonRequest& r = fields.request;
  int sources = r.prompt.has_value() + !r.messages.empty() + r.prompt_token_ids.has_value();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "a request needs exactly one of \"prompt\", \"messages\" or \"prompt_token_ids\"");
  }
  r.beam = BeamIfRequested(fields.beam);
  return std::move(r);
}

}  // namespace tandem::client
