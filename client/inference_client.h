// What every gRPC client command of tandem-coordinator shares (`tandem
// generate`, `tandem chat`, `tandem bench`, `tandem health`), on the C++ SDK
// (include/tandem/client.h): a Client for an address and a per-call timeout,
// the SDK request of a parsed JSONL request, one streamed call assembled into
// the engine's completion structs, and readable status text.
#ifndef TANDEM_CLIENT_INFERENCE_CLIENT_H_
#define TANDEM_CLIENT_INFERENCE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/json_request.h"
#include "coordinator/api/request.h"
#include "tandem/client.h"

namespace tandem::client {

// A client of the coordinator at `addr`; every call's deadline is `timeout_s`
// seconds (0: none); TLS trusting the PEM CA file `tls_ca` when it is not
// empty (--tls-ca, or the environment's TANDEM_TLS_CA), else plaintext; the
// API key, if any, from the environment's TANDEM_API_KEY. `retry` false
// turns off the SDK's UNAVAILABLE retries (a benchmark measures what the
// server answers).
std::unique_ptr<tandem::Client> NewClient(const std::string& addr, int32_t timeout_s,
                                          const std::string& tls_ca, bool retry = true);

// The SDK request for `request` (chat prompts get the generation prompt).
tandem::GenerateRequest SdkRequest(const JsonRequest& request);

// An SDK completion as the engine's struct (what result_json prints).
coordinator::Completion ToCompletion(const tandem::Completion& completion);
std::vector<coordinator::PositionLogprobs> ToPositionLogprobs(
    const std::vector<tandem::PositionLogprobs>& logprobs);

// What one GenerateStream call produced.
struct StreamedGeneration {
  absl::Status status;  // the call's; not OK when it failed or broke off
  std::vector<coordinator::Completion> completions;  // by index, n of them
  int64_t cached_prompt_tokens = 0;
  std::vector<coordinator::PositionLogprobs> prompt_logprobs;  // when asked for
  std::string error;  // a completion failed: the server's reason
};

// Runs `request` (asking for `num_completions` >= 1) to the end of its
// stream. `on_text` (may be empty) sees index 0's text as it arrives.
StreamedGeneration StreamGenerate(tandem::Client& client, const tandem::GenerateRequest& request,
                                  int32_t num_completions,
                                  const std::function<void(const std::string&)>& on_text);

// "UNAVAILABLE: <message>".
std::string DescribeStatus(const absl::Status& status);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INFERENCE_CLIENT_H_
