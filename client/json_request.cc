#include "client/json_request.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "draft/api/speculative_spec.h"

namespace tandem::client {
namespace {

using nlohmann::json;

absl::Status TypeError(const std::string& key, const char* expected, const json& value) {
  return absl::InvalidArgumentError(absl::StrFormat("field \"%s\" must be %s, got %s", key,
                                                    expected, value.dump()));
}

absl::StatusOr<int64_t> GetInt(const json& j, const std::string& key) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) return TypeError(key, "an integer", v);
  return v.get<int64_t>();
}

absl::StatusOr<int32_t> GetInt32(const json& j, const std::string& key) {
  absl::StatusOr<int64_t> v = GetInt(j, key);
  if (!v.ok()) return v.status();
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field \"%s\" = %d does not fit in 32 bits", key, *v));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<double> GetDouble(const json& j, const std::string& key) {
  const json& v = j.at(key);
  if (!v.is_number()) return TypeError(key, "a number", v);
  return v.get<double>();
}

absl::StatusOr<float> GetFloat(const json& j, const std::string& key) {
  absl::StatusOr<double> v = GetDouble(j, key);
  if (!v.ok()) return v.status();
  return static_cast<float>(*v);
}

absl::StatusOr<std::vector<int32_t>> GetIntList(const json& j, const std::string& key) {
  const json& v = j.at(key);
  if (!v.is_array()) return TypeError(key, "an array of integers", v);
  std::vector<int32_t> out;
  for (const json& e : v) {
    if (!e.is_number_integer()) return TypeError(key, "an array of integers", v);
    int64_t x = e.get<int64_t>();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("field \"%s\" has token id %d, which does not fit in 32 bits", key, x));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

#define TANDEM_ASSIGN_FIELD(target, expr) \
  do {                                    \
    auto value_ = (expr);                 \
    if (!value_.ok()) return value_.status(); \
    target = *value_;                     \
  } while (0)

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
  coordinator::BeamSearchParams beam = beam_defaults;
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("request line is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("request line must be a JSON object");
  JsonRequest r;
  r.params = defaults;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "prompt") {
      if (!v.is_string()) return TypeError(key, "a string", v);
      r.prompt = v.get<std::string>();
    } else if (key == "messages") {
      if (!v.is_array()) return TypeError(key, "an array of {role, content}", v);
      for (const json& m : v) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") ||
            !m["role"].is_string() || !m["content"].is_string()) {
          return TypeError(key, "an array of {role, content} strings", v);
        }
        r.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
      }
    } else if (key == "prompt_token_ids") {
      TANDEM_ASSIGN_FIELD(r.prompt_token_ids, GetIntList(j, key));
    } else if (key == "max_tokens") {
      TANDEM_ASSIGN_FIELD(r.params.max_tokens, GetInt32(j, key));
    } else if (key == "min_tokens") {
      TANDEM_ASSIGN_FIELD(r.params.min_tokens, GetInt32(j, key));
    } else if (key == "temperature") {
      TANDEM_ASSIGN_FIELD(r.params.temperature, GetFloat(j, key));
    } else if (key == "top_k") {
      TANDEM_ASSIGN_FIELD(r.params.top_k, GetInt32(j, key));
    } else if (key == "top_p") {
      TANDEM_ASSIGN_FIELD(r.params.top_p, GetFloat(j, key));
    } else if (key == "min_p") {
      TANDEM_ASSIGN_FIELD(r.params.min_p, GetFloat(j, key));
    } else if (key == "repetition_penalty") {
      TANDEM_ASSIGN_FIELD(r.params.repetition_penalty, GetFloat(j, key));
    } else if (key == "presence_penalty") {
      TANDEM_ASSIGN_FIELD(r.params.presence_penalty, GetFloat(j, key));
    } else if (key == "frequency_penalty") {
      TANDEM_ASSIGN_FIELD(r.params.frequency_penalty, GetFloat(j, key));
    } else if (key == "seed") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
        return TypeError(key, "a non-negative integer", v);
      }
      r.params.seed = v.get<uint64_t>();
    } else if (key == "n") {
      TANDEM_ASSIGN_FIELD(r.params.n, GetInt32(j, key));
    } else if (key == "logprobs" || key == "top_logprobs") {
      TANDEM_ASSIGN_FIELD(r.params.logprobs, GetInt32(j, key));
    } else if (key == "stop") {
      r.params.stop.clear();
      if (v.is_string()) {
        r.params.stop.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const json& s : v) {
          if (!s.is_string()) return TypeError(key, "a string or an array of strings", v);
          r.params.stop.push_back(s.get<std::string>());
        }
      } else {
        return TypeError(key, "a string or an array of strings", v);
      }
    } else if (key == "stop_token_ids") {
      TANDEM_ASSIGN_FIELD(r.params.stop_token_ids, GetIntList(j, key));
    } else if (key == "ignore_eos") {
      if (!v.is_boolean()) return TypeError(key, "true or false", v);
      r.params.ignore_eos = v.get<bool>();
    } else if (key == "priority") {
      TANDEM_ASSIGN_FIELD(r.priority, GetInt32(j, key));
    } else if (key == "num_speculative_tokens") {
      int32_t n = 0;
      TANDEM_ASSIGN_FIELD(n, GetInt32(j, key));
      if (n < 0 || n > 64) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "num_speculative_tokens %d is out of range: must be in [0, 64] (0 = off)", n));
      }
      r.num_speculative_tokens = n;
    } else if (key == "draft") {
      if (!v.is_string()) return TypeError(key, "a draft kind", v);
      r.draft = v.get<std::string>();
      if (absl::Status s = draft::ValidateRequestedDraft(r.draft); !s.ok()) return s;
    } else if (key == "num_beams") {
      TANDEM_ASSIGN_FIELD(beam.num_beams, GetInt32(j, key));
    } else if (key == "num_beam_groups") {
      TANDEM_ASSIGN_FIELD(beam.num_beam_groups, GetInt32(j, key));
    } else if (key == "num_return_sequences") {
      TANDEM_ASSIGN_FIELD(beam.num_return_sequences, GetInt32(j, key));
    } else if (key == "min_new_tokens") {
      TANDEM_ASSIGN_FIELD(r.params.min_tokens, GetInt32(j, key));
    } else if (key == "length_penalty") {
      TANDEM_ASSIGN_FIELD(beam.length_penalty, GetDouble(j, key));
    } else if (key == "diversity_penalty") {
      TANDEM_ASSIGN_FIELD(beam.diversity_penalty, GetDouble(j, key));
    } else if (key == "do_sample") {
      if (!v.is_boolean()) return TypeError(key, "true or false", v);
      beam.do_sample = v.get<bool>();
    } else if (key == "early_stopping") {
      if (v.is_boolean()) {
        beam.early_stopping =
            v.get<bool>() ? coordinator::EarlyStopping::kTrue : coordinator::EarlyStopping::kFalse;
      } else if (v.is_string() && v.get<std::string>() == "never") {
        beam.early_stopping = coordinator::EarlyStopping::kNever;
      } else {
        return TypeError(key, "true, false or \"never\"", v);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("unknown request field \"%s\"", key));
    }
  }
  int sources = r.prompt.has_value() + !r.messages.empty() + r.prompt_token_ids.has_value();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "a request needs exactly one of \"prompt\", \"messages\" or \"prompt_token_ids\"");
  }
  r.beam = BeamIfRequested(beam);
  return r;
}

}  // namespace tandem::client
