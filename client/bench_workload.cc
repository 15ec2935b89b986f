#include "client/bench_workload.h"

#include <fstream>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace tandem::client {

absl::StatusOr<std::vector<JsonRequest>> RandomRequests(const RandomWorkload& w) {
  if (w.num_requests < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_requests %d is out of range: must be >= 1", w.num_requests));
  }
  if (w.input_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("input_len %d is out of range: must be >= 1", w.input_len));
  }
  if (w.output_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("output_len %d is out of range: must be >= 1", w.output_len));
  }
  if (w.shared_prefix_len < 0 || w.shared_prefix_len > w.input_len) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared_prefix_len %d is out of range: must be in [0, input_len %d]",
                        w.shared_prefix_len, w.input_len));
  }
  if (w.vocab_size <= kMinRandomTokenId) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vocab_size %d is too small for random prompts: must be > %d", w.vocab_size,
        kMinRandomTokenId));
  }
  std::mt19937_64 rng(w.seed);
  std::uniform_int_distribution<int32_t> token(kMinRandomTokenId, w.vocab_size - 1);
  std::vector<int32_t> prefix(w.shared_prefix_len);
  for (int32_t& t : prefix) t = token(rng);

  std::vector<JsonRequest> requests(w.num_requests);
  for (JsonRequest& r : requests) {
    std::vector<int32_t> ids = prefix;
    ids.reserve(w.input_len);
    while (static_cast<int32_t>(ids.size()) < w.input_len) ids.push_back(token(rng));
    r.prompt_token_ids = std::move(ids);
    r.params.temperature = 0;
    r.params.max_tokens = w.output_len;
    r.params.ignore_eos = true;
  }
  return requests;
}

absl::StatusOr<std::vector<JsonRequest>> DatasetRequests(const std::string& path,
                                                         int32_t num_requests,
                                                         int32_t output_len) {
  if (num_requests < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_requests %d is out of range: must be >= 1", num_requests));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot open dataset '%s'", path));
  sampling::SamplingParams defaults;
  defaults.temperature = 0;
  defaults.max_tokens = output_len;
  std::vector<JsonRequest> lines;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<JsonRequest> r = ParseJsonRequest(line, defaults);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("dataset '%s' line %d: %s", path, line_number, r.status().message()));
    }
    lines.push_back(*std::move(r));
  }
  if (lines.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("dataset '%s' has no requests", path));
  }
  std::vector<JsonRequest> requests;
  requests.reserve(num_requests);
  for (int32_t i = 0; i < num_requests; ++i) requests.push_back(lines[i % lines.size()]);
  return requests;
}

}  // namespace tandem::client
