// `tandem bench`: a load generator for tandem-coordinator (gRPC
// Inference.GenerateStream) or, with backend "openai", for any
// OpenAI-compatible HTTP server (openai_bench_client.h). Sends
// `num_requests` streaming requests either from
// `concurrency` closed-loop clients or as Poisson arrivals at `request_rate`
// per second, with random token prompts (`input_len` ids, the first
// `shared_prefix_len` common to all, `output_len` tokens each, EOS ignored) or
// the requests of a JSONL `dataset`. Measures on the client, per request: time
// to first token, inter-token latencies, time per output token and end-to-end
// latency. From the coordinator's cumulative worker-group counters (ModelInfo
// before and after the run) it adds the steps run, mean step time and the
// coordinator<->worker overhead share (n/a when the server reports none, and
// for the openai backend). With `goodput` SLOs it reports the requests that
// met every one (count, per second, fraction), as vLLM's benchmark does.
// Prints a table and, with `out`, writes the same numbers as JSON, with
// every request's latencies (bench/plot_bench.py draws them).
#ifndef TANDEM_CLIENT_COMMANDS_BENCH_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_BENCH_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// A service-level objective on one latency: a request meets it when its
// `metric` (ttft, tpot or e2e) is at most `ms`.
struct LatencySlo {
  std::string metric;
  double ms = 0;
};

struct BenchOptions {
  std::string backend = "tandem";  // tandem (gRPC, --addr) or openai (HTTP, --url)
  std::string addr;               // tandem: the coordinator, HOST:PORT
  std::string tls_ca;             // tandem: TLS trusting this PEM CA file; "" = plaintext
  std::string url;                // openai: http://HOST:PORT[/v1]
  std::string model;              // openai: the "model" sent; empty = the server's first
  int32_t vocab_size = 0;         // openai, random prompts: ids below it; 0 = 32000
  std::vector<LatencySlo> goodput;  // --goodput ttft:MS,tpot:MS,e2e:MS
  int32_t concurrency = 0;        // closed loop: requests in flight, [1, 4096]
  double request_rate = 0;        // open loop: Poisson arrivals per second, (0, 1e6]
  int32_t num_requests = 100;     // [1, 1000000]
  int32_t input_len = 128;        // random prompts: tokens per prompt, >= 1
  int32_t output_len = 128;       // tokens generated per request (dataset: the default max_tokens)
  std::string dataset;            // JSONL requests (cycled to num_requests); replaces random prompts
  int32_t shared_prefix_len = 0;  // random prompts: leading ids shared by all, [0, input_len]
  uint64_t seed = 0;              // prompts and arrival gaps
  std::string out;                // JSON report path; empty = none
  int32_t timeout_s = 600;        // per-request deadline; 0 = none
};

// "ttft:MS", "tpot:MS" or "e2e:MS" items (MS > 0). INVALID_ARGUMENT naming
// the item otherwise.
absl::StatusOr<std::vector<LatencySlo>> ParseGoodput(const std::vector<std::string>& items);

// Returns the process exit code: 0 when the run completed (failed requests are
// counted in the report, and the first failure is printed to stderr), 1 on bad
// options, an unreachable coordinator, an unwritable report or when every
// request failed.
int BenchCommand(const BenchOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_BENCH_COMMAND_H_
