// `tandem generate`: the cluster client. Sends one prompt or a JSONL file of
// requests to a tandem-coordinator over gRPC (Inference.GenerateStream) and
// prints what `tandem run` prints for the same input: streamed text for one
// prompt, one JSON object per sequence with --json, one JSON line per request
// (in input order) with --requests.
#ifndef TANDEM_CLIENT_COMMANDS_GENERATE_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_GENERATE_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "coordinator/api/beam_search_params.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::client {

struct GenerateOptions {
  std::string addr = "127.0.0.1:50051";  // the coordinator, HOST:PORT
  std::string tls_ca;  // TLS trusting this PEM CA file; "" = plaintext
  std::optional<std::string> prompt;
  std::optional<std::string> chat;  // one user message, through the chat template
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<std::string> requests_file;  // JSONL, one request per line
  sampling::SamplingParams params;           // defaults for every request
  // Beam flags, defaults for every request (beam search when num_beams > 1
  // or num_beam_groups > 1).
  coordinator::BeamSearchParams beam;
  bool json = false;
  int32_t concurrency = 1;  // --requests: requests in flight at once, >= 1
  int32_t timeout_s = 0;    // per-request gRPC deadline; 0 = none
};

// Returns the process exit code: 0 on success, 1 when a request fails (the
// gRPC status code name and message go to stderr; with --requests the failed
// request's line is {"error": ...}).
int GenerateCommand(const GenerateOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_GENERATE_COMMAND_H_
