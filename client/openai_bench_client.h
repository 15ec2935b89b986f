// The `--backend openai` side of `tandem bench`: drives any OpenAI-compatible
// server (tandem's coordinator, llama.cpp's llama-server, vLLM) through
// streaming POST BASE/completions over plain HTTP/1.1 (Boost.Beast, one
// connection per request), so the same workload measures them side by side.
// Per request: the prompt (token ids when the workload has them, else
// text), max_tokens, temperature, top_p, top_k, seed, ignore_eos, stream
// with usage. TTFT is the first event carrying text; ITL the gaps between
// such events; the token counts come from the final usage (the events when
// the server sends no usage).
#ifndef TANDEM_CLIENT_OPENAI_BENCH_CLIENT_H_
#define TANDEM_CLIENT_OPENAI_BENCH_CLIENT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/bench_request.h"
#include "client/json_request.h"

namespace tandem::client {

struct OpenAiTarget {
  std::string host;
  std::string port;
  std::string base_path;  // "/v1"
  std::string model;      // sent as "model"
  int32_t context_length = 0;  // max_model_len when the server reports it; 0 unknown
  // Sent as "Authorization: Bearer KEY" when set (tandem bench takes it
  // from OPENAI_API_KEY, as OpenAI's tools do).
  std::string api_key;
};

// Parses "http://HOST:PORT[/PATH]" (PATH defaults to /v1). INVALID_ARGUMENT
// naming the URL for another scheme, a missing port or host.
absl::StatusOr<OpenAiTarget> ParseOpenAiUrl(const std::string& url);

// GET BASE/models: fills `model` (when empty: the first model served) and
// `context_length`. UNAVAILABLE naming the server when it cannot be reached
// or answers no model.
absl::Status QueryOpenAiModel(OpenAiTarget& target, int32_t timeout_s);

// One streaming completion; never throws (errors land in the record).
RequestRecord RunOpenAiRequest(const OpenAiTarget& target, const JsonRequest& request,
                               int32_t timeout_s);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_OPENAI_BENCH_CLIENT_H_
