#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <cstddef>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tandem::sampling {
namespace {

absl::Status OutOfRange(absl::string_view field, float value, absl::string_view limit) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " ", value, " is out of range: must be ", limit));
}

absl::Status OutOfRange(absl::string_view field, int64_t value, absl::string_view limit) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " ", value, " is out of range: must be ", limit));
}

// Returns the byte offset of the first invalid UTF-8 sequence in `s`, or -1.
// Rejects overlong forms, surrogates and code points above U+10FFFF.
int64_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    uint32_t min_cp;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F, min_cp = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F, min_cp = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07, min_cp = 0x10000;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > s.size()) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return static_cast<int64_t>(i);
    }
    i += len;
  }
  return -1;
}

// At most kMaxStopTokenIds stop_token_ids, each in the vocabulary; at most
// kMaxStopStrings stop strings of [1, kMaxStopStringBytes] bytes of valid
// UTF-8.
absl::Status ValidateStops(const SamplingParams& p, int32_t vocab_size) {
  if (p.stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return absl::InvalidArgumentError(absl::StrCat("stop_token_ids has ", p.stop_token_ids.size(),
                                                   " ids: at most ", kMaxStopTokenIds,
                                                   " are allowed"));
  }
  if (p.stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return absl::InvalidArgumentError(absl::StrCat("stop has ", p.stop.size(),
                                                   " strings: at most ", kMaxStopStrings,
                                                   " are allowed"));
  }
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    const int32_t id = p.stop_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return OutOfRange(absl::StrCat("stop_token_ids[", i, "]"), int64_t{id},
                        absl::StrCat("in [0, vocab_size) = [0, ", vocab_size, ")"));
    }
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    if (p.stop[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop[", i, "] is empty: stop strings must be at least 1 byte"));
    }
    if (p.stop[i].size() > static_cast<size_t>(kMaxStopStringBytes)) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] has ", p.stop[i].size(),
                                                     " bytes: at most ", kMaxStopStringBytes,
                                                     " are allowed"));
    }
    const int64_t bad = FirstInvalidUtf8(p.stop[i]);
    if (bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop[", i, "] is not valid UTF-8 at byte ", bad, " of ", p.stop[i].size(),
          ": stop strings must be valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  CHECK(vocab_size >= 1, "vocab_size %d must be >= 1", vocab_size);
  // Each comparison is written so that NaN fails it.
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return OutOfRange("temperature", p.temperature, ">= 0 and finite");
  }
  if (p.top_k < -1) {
    return OutOfRange("top_k", int64_t{p.top_k}, ">= -1 (-1 or 0 disables top-k)");
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return OutOfRange("top_p", p.top_p, "in (0, 1]");
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return OutOfRange("min_p", p.min_p, "in [0, 1]");
  }
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty)) {
    return OutOfRange("repetition_penalty", p.repetition_penalty, "> 0 and finite");
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return OutOfRange("presence_penalty", p.presence_penalty, "in [-2, 2]");
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return OutOfRange("frequency_penalty", p.frequency_penalty, "in [-2, 2]");
  }
  if (p.max_tokens < 1) {
    return OutOfRange("max_tokens", int64_t{p.max_tokens}, ">= 1");
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return OutOfRange("min_tokens", int64_t{p.min_tokens},
                      absl::StrCat("in [0, max_tokens] = [0, ", p.max_tokens, "]"));
  }
  RETURN_IF_ERROR(ValidateStops(p, vocab_size));
  if (p.logprobs < 0 || p.logprobs > kMaxLogprobs) {
    return OutOfRange("logprobs", int64_t{p.logprobs}, absl::StrCat("in [0, ", kMaxLogprobs, "]"));
  }
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > kMaxLogprobs) {
    return OutOfRange("prompt_logprobs", int64_t{p.prompt_logprobs},
                      absl::StrCat("-1 (none) or in [0, ", kMaxLogprobs, "]"));
  }
  if (p.beam_candidates < 0 || p.beam_candidates > kMaxBeamCandidates) {
    return OutOfRange("beam_candidates", int64_t{p.beam_candidates},
                      absl::StrCat("in [0, ", kMaxBeamCandidates, "]"));
  }
  if (p.beam_sample && !(p.beam_candidates >= 1 && p.temperature >= kGreedyTemperature)) {
    // The beam warpers divide by the temperature and rank candidates.
    return absl::InvalidArgumentError(absl::StrCat(
        "beam_sample with beam_candidates ", p.beam_candidates, " and temperature ",
        p.temperature, ": beam sampling needs beam_candidates >= 1 and temperature >= ",
        kGreedyTemperature));
  }
  if (p.n < 1 || p.n > kMaxN) {
    return OutOfRange("n", int64_t{p.n}, absl::StrCat("in [1, ", kMaxN, "]"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::sampling
