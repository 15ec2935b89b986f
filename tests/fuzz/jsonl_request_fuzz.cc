// libFuzzer target for one `tandem run --requests` line
// (client/json_request.h): any line must either be rejected with a non-empty
// message, or parse into a request with exactly one prompt source whose
// integer fields hold exactly the line's values (nothing wraps or is clamped
// silently). The first byte picks the defaults (the plain ones, or beam
// flags as `--num_beams 4` would give); the rest is the line. Built by
// run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "client/json_request.h"
#include "nlohmann/json.hpp"

namespace {

using tandem::client::JsonRequest;
using tandem::client::ParseJsonRequest;
using tandem::coordinator::BeamSearchParams;
using tandem::sampling::SamplingParams;

[[noreturn]] void Fail(const char* what, std::string_view detail = "") {
  std::fprintf(stderr, "jsonl_request_fuzz invariant broken: %s %.*s\n", what,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Reads every part of a parsed request, so the sanitizers see any dangling
// or uninitialized data in it.
void Touch(const JsonRequest& r) {
  size_t sum = r.draft.size() + static_cast<size_t>(r.priority);
  if (r.prompt) sum += r.prompt->size();
  for (const auto& m : r.messages) sum += m.role.size() + m.content.size();
  if (r.prompt_token_ids) {
    for (int32_t id : *r.prompt_token_ids) sum += static_cast<size_t>(id);
  }
  for (const auto& s : r.params.stop) sum += s.size();
  for (int32_t id : r.params.stop_token_ids) sum += static_cast<size_t>(id);
  // Floats stay floats: the line may hold any value (validation is later),
  // and converting one out of range to an integer is undefined.
  double real = r.params.temperature + r.params.top_p + r.params.min_p;
  if (r.params.seed) sum += *r.params.seed;
  if (r.beam) {
    sum += static_cast<size_t>(r.beam->num_beams);
    real += r.beam->length_penalty;
  }
  if (r.num_speculative_tokens) sum += static_cast<size_t>(*r.num_speculative_tokens);
  if (sum == 1u << 31 || real == 1.5e300) std::fputc(' ', stderr);  // keeps the reads
}

// The line's integer field `key` (when present and the only field that
// sets the member) must be an in-range integer equal to `stored`.
void CheckInt(const nlohmann::json& line, const char* key, const char* alias, int64_t stored) {
  if (!line.contains(key) || (alias != nullptr && line.contains(alias))) return;
  const nlohmann::json& v = line[key];
  if (!v.is_number_integer()) Fail("a non-integer accepted for", key);
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    Fail("an integer past int32 accepted for", key);
  }
  if (v.get<int64_t>() != stored) Fail("an integer stored changed for", key);
}

void CheckIntegers(const std::string& text, const JsonRequest& r, const BeamSearchParams& beam) {
  const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object()) Fail("a line that is not a JSON object accepted");
  const SamplingParams& p = r.params;
  CheckInt(line, "max_tokens", nullptr, p.max_tokens);
  CheckInt(line, "min_tokens", "min_new_tokens", p.min_tokens);
  CheckInt(line, "min_new_tokens", "min_tokens", p.min_tokens);
  CheckInt(line, "top_k", nullptr, p.top_k);
  CheckInt(line, "n", nullptr, p.n);
  CheckInt(line, "logprobs", "top_logprobs", p.logprobs);
  CheckInt(line, "top_logprobs", "logprobs", p.logprobs);
  CheckInt(line, "prompt_logprobs", nullptr, p.prompt_logprobs);
  CheckInt(line, "priority", nullptr, r.priority);
  if (r.beam) {
    CheckInt(line, "num_beams", nullptr, r.beam->num_beams);
    CheckInt(line, "num_beam_groups", nullptr, r.beam->num_beam_groups);
    CheckInt(line, "num_return_sequences", nullptr, r.beam->num_return_sequences);
    if (r.beam->num_beams <= 1 && r.beam->num_beam_groups <= 1) Fail("beam without beams");
  } else if (!line.contains("num_beams") && !line.contains("num_beam_groups") &&
             (beam.num_beams > 1 || beam.num_beam_groups > 1)) {
    Fail("the beam defaults dropped");
  }
  if (line.contains("prompt_token_ids")) {
    const nlohmann::json& ids = line["prompt_token_ids"];
    if (r.prompt_token_ids && ids.size() != r.prompt_token_ids->size()) Fail("ids lost");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  SamplingParams defaults;
  BeamSearchParams beam_defaults;
  if ((data[0] & 1) != 0) {
    beam_defaults.num_beams = 4;
    beam_defaults.num_return_sequences = 2;
  }
  const std::string line(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<JsonRequest> parsed = ParseJsonRequest(line, defaults, beam_defaults);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) Fail("an error without a message");
    return 0;
  }
  const JsonRequest& r = *parsed;
  const int sources =
      r.prompt.has_value() + !r.messages.empty() + r.prompt_token_ids.has_value();
  if (sources != 1) Fail("a request without exactly one prompt source");
  CheckIntegers(line, r, beam_defaults);
  Touch(r);
  return 0;
}
