// What `tandem bench` measures of one request, whichever protocol carried it
// (tandem's gRPC GenerateStream or an OpenAI-compatible HTTP stream).
#ifndef TANDEM_CLIENT_BENCH_REQUEST_H_
#define TANDEM_CLIENT_BENCH_REQUEST_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/json_request.h"

namespace tandem::client {

struct RequestRecord {
  bool ok = false;
  std::string error;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_s = 0;  // send → first token (only when output_tokens > 0)
  double e2e_s = 0;   // send → end of stream
  // Gaps between successive token-carrying messages (a message may carry
  // several tokens when the server coalesces them).
  std::vector<double> itl_s;
};

// Sends one request and measures it; thread-safe (called from every client
// thread at once).
using RequestRunner = std::function<RequestRecord(const JsonRequest&)>;

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_REQUEST_H_
