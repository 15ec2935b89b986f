#include "client/up_config.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace tandem::client {
namespace {

using nlohmann::json;

// Values in messages are cut here so that a huge array stays readable.
constexpr size_t kMaxShownValueChars = 120;

std::string Shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > kMaxShownValueChars) text = text.substr(0, kMaxShownValueChars) + "...";
  return text;
}

absl::Status TypeError(const std::string& source, absl::string_view key, const char* expected,
                       const json& value) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: key \"%s\" must be %s, got %s", source,
                                                    key, expected, Shown(value)));
}

using Setter = absl::Status (*)(const std::string& source, absl::string_view key, const json& v,
                                UpOptions* o);

absl::StatusOr<std::string> String(const std::string& source, absl::string_view key,
                                   const json& v) {
  if (!v.is_string()) return TypeError(source, key, "a string", v);
  return v.get<std::string>();
}

absl::StatusOr<int32_t> Int32(const std::string& source, absl::string_view key, const json& v) {
  if (!v.is_number_integer()) return TypeError(source, key, "an integer", v);
  // Unsigned values above int64's range read as is_number_unsigned; both are
  // checked against int32 without a narrowing surprise.
  if (v.is_number_unsigned() ? v.get<uint64_t>() > std::numeric_limits<int32_t>::max()
                             : (v.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
                                v.get<int64_t>() > std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key \"%s\" = %s does not fit in a 32-bit integer", source, key, Shown(v)));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

absl::StatusOr<std::vector<std::string>> StringList(const std::string& source,
                                                    absl::string_view key, const json& v) {
  if (!v.is_array()) return TypeError(source, key, "an array of strings", v);
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) return TypeError(source, key, "an array of strings", v);
    out.push_back(e.get<std::string>());
  }
  return out;
}

// Assigns the parsed value of `expr` to `target`, or returns its error.
#define TANDEM_UP_CONFIG_SET(target, expr)  \
  do {                                      \
    auto value_ = (expr);                   \
    if (!value_.ok()) return value_.status(); \
    target = *std::move(value_);            \
  } while (0)

struct KeySpec {
  absl::string_view key;
  absl::string_view flag;        // the flag of the same option
  absl::string_view other_flag;  // a second flag that sets it, or ""
  Setter set;
};

// Captureless lambdas decay to Setter; each parses its type and assigns.
const KeySpec kKeys[] = {
    {"model", "model", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->model, String(s, k, v));
       return absl::OkStatus();
     }},
    {"tp", "tp", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->tp, Int32(s, k, v));
       return absl::OkStatus();
     }},
    {"replicas", "replicas", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->replicas, Int32(s, k, v));
       return absl::OkStatus();
     }},
    {"port", "port", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->port, Int32(s, k, v));
       return absl::OkStatus();
     }},
    {"http_port", "http_port", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->http_port, Int32(s, k, v));
       return absl::OkStatus();
     }},
    {"bin_dir", "bin_dir", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->bin_dir, String(s, k, v));
       return absl::OkStatus();
     }},
    {"mpirun", "mpirun", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->mpirun, String(s, k, v));
       return absl::OkStatus();
     }},
    {"grace_s", "grace_s", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->grace_s, Int32(s, k, v));
       return absl::OkStatus();
     }},
    {"draft_model", "draft_model", "no_draft",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       std::string model;
       TANDEM_UP_CONFIG_SET(model, String(s, k, v));
       SetDraftModel(model, o);
       return absl::OkStatus();
     }},
    {"worker_args", "worker_arg", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->worker_args, StringList(s, k, v));
       return absl::OkStatus();
     }},
    {"draft_args", "draft_arg", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->draft_args, StringList(s, k, v));
       return absl::OkStatus();
     }},
    {"tls_cert", "tls_cert", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->tls_cert, String(s, k, v));
       return absl::OkStatus();
     }},
    {"tls_key", "tls_key", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->tls_key, String(s, k, v));
       return absl::OkStatus();
     }},
    {"coordinator_args", "coordinator_arg", "",
     [](const std::string& s, absl::string_view k, const json& v, UpOptions* o) {
       TANDEM_UP_CONFIG_SET(o->coordinator_args, StringList(s, k, v));
       return absl::OkStatus();
     }},
};

#undef TANDEM_UP_CONFIG_SET

const KeySpec* FindKey(absl::string_view key) {
  for (const KeySpec& spec : kKeys) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::string KeyList() {
  std::vector<absl::string_view> keys;
  for (const KeySpec& spec : kKeys) keys.push_back(spec.key);
  return absl::StrJoin(keys, ", ");
}

}  // namespace

std::string UpConfigKeyOfFlag(absl::string_view flag_name) {
  for (const KeySpec& spec : kKeys) {
    if (spec.flag == flag_name || (!spec.other_flag.empty() && spec.other_flag == flag_name)) {
      return std::string(spec.key);
    }
  }
  return "";
}

void SetDraftModel(const std::string& value, UpOptions* options) {
  options->draft = value != "none";
  options->draft_model = options->draft ? value : "";
}

absl::Status ApplyUpConfigJson(absl::string_view text, const std::string& source,
                               const std::set<std::string>& keep, UpOptions* options) {
  json config;
  // nlohmann reports where the syntax breaks only through its exception; it
  // is caught right here and never crosses this function.
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {  // syntax, or a number out of range
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not valid JSON: %s", source, e.what()));
  }
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: must be a JSON object of up options (keys: %s), got %s", source, KeyList(),
        Shown(config)));
  }
  for (auto it = config.begin(); it != config.end(); ++it) {
    const KeySpec* spec = FindKey(it.key());
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown key \"%s\": the keys are %s", source, it.key(), KeyList()));
    }
    // A key the command line sets is still parsed: a broken file is an error
    // even when every value in it is overridden.
    UpOptions scratch;
    UpOptions* target = keep.contains(it.key()) ? &scratch : options;
    if (absl::Status s = spec->set(source, spec->key, it.value(), target); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ApplyUpConfigFile(const std::string& path, const std::set<std::string>& keep,
                               UpOptions* options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--config %s: is a directory, expected a JSON file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--config %s: cannot open: %s", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--config %s: cannot read: %s", path, std::strerror(errno)));
  }
  return ApplyUpConfigJson(text.str(), path, keep, options);
}

}  // namespace tandem::client
