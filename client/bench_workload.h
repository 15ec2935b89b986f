// The requests `tandem bench` sends: random token-id prompts with a shared
// prefix, or the lines of a JSONL dataset.
#ifndef TANDEM_CLIENT_BENCH_WORKLOAD_H_
#define TANDEM_CLIENT_BENCH_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/json_request.h"

namespace tandem::client {

// Token ids below this are left out of random prompts: small ids are the
// special and control tokens in the vocabularies tandem serves.
inline constexpr int32_t kMinRandomTokenId = 100;

struct RandomWorkload {
  int32_t num_requests = 0;       // >= 1
  int32_t input_len = 0;          // >= 1
  int32_t output_len = 0;         // >= 1
  int32_t shared_prefix_len = 0;  // [0, input_len]
  int32_t vocab_size = 0;         // > kMinRandomTokenId
  uint64_t seed = 0;
};

// `num_requests` greedy requests of `input_len` ids drawn uniformly from
// [kMinRandomTokenId, vocab_size), the first `shared_prefix_len` identical in
// all; each generates exactly `output_len` tokens (ignore_eos). Deterministic
// in `seed`. Errors name the bad field, its value and the limit.
absl::StatusOr<std::vector<JsonRequest>> RandomRequests(const RandomWorkload& w);

// The requests of the JSONL file at `path` (blank lines skipped), parsed with
// ParseJsonRequest over greedy defaults with max_tokens `output_len`, repeated
// in order until there are `num_requests`. Errors name the file and line.
absl::StatusOr<std::vector<JsonRequest>> DatasetRequests(const std::string& path,
                                                         int32_t num_requests,
                                                         int32_t output_len);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_WORKLOAD_H_
