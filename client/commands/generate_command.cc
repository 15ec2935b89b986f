#include "client/commands/generate_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "client/command_failure.h"
#include "client/inference_client.h"
#include "client/json_request.h"
#include "client/result_json.h"
#include "coordinator/api/request.h"
#include "nlohmann/json.hpp"
#include "tandem/client.h"

namespace tandem::client {
namespace {

using nlohmann::json;

// What one request produced: its stream and, when asked for, the prompt's
// token ids.
struct Result {
  StreamedGeneration stream;  // stream.status is the Tokenize call's when that failed
  std::vector<int32_t> prompt_token_ids;
  int32_t top_k = 0;
};

// Runs one request to the end. `on_text` (may be empty) sees index-0 text as
// it streams. With `want_prompt_ids`, text and chat prompts are tokenized by
// the server (Tokenize gives exactly the ids Generate uses).
Result RunOne(tandem::Client& client, const JsonRequest& request, bool want_prompt_ids,
              const std::function<void(const std::string&)>& on_text) {
  Result result;
  result.top_k = request.params.logprobs;
  const tandem::GenerateRequest sdk_request = SdkRequest(request);
  result.stream = StreamGenerate(client, sdk_request, request.params.n, on_text);
  if (!result.stream.status.ok()) return result;
  if (request.prompt_token_ids) {
    result.prompt_token_ids = *request.prompt_token_ids;
  } else if (want_prompt_ids) {
    absl::StatusOr<std::vector<int32_t>> ids =
        request.prompt ? client.Tokenize(*request.prompt)
                       : client.TokenizeChat(std::get<tandem::ChatPrompt>(sdk_request.prompt));
    if (ids.ok()) {
      result.prompt_token_ids = *std::move(ids);
    } else {
      result.stream.status = ids.status();
    }
  }
  return result;
}

int Fail(const std::string& message) { return CommandFailed("generate", message); }
int Fail(const absl::Status& status) { return CommandFailed("generate", status); }

// The options' own consistency (one prompt source, --concurrency, --addr);
// INVALID_ARGUMENT naming the flag.
absl::Status Validate(const GenerateOptions& o) {
  int sources = o.prompt.has_value() + o.chat.has_value() + o.prompt_ids.has_value() +
                o.requests_file.has_value();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --prompt, --chat, --prompt-ids or --requests");
  }
  if (o.concurrency < 1 || o.concurrency > 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--concurrency %d is out of range: must be in [1, 1024]", o.concurrency));
  }
  if (o.addr.empty()) return absl::InvalidArgumentError("--addr HOST:PORT is required");
  return absl::OkStatus();
}

// Every request to send, parsed before any is sent so that a bad line fails
// up front: one per non-blank line of --requests (NOT_FOUND when it cannot
// be opened, INVALID_ARGUMENT naming a bad line), else the flags' one.
absl::StatusOr<std::vector<JsonRequest>> ReadRequests(const GenerateOptions& o) {
  std::vector<JsonRequest> requests;
  if (!o.requests_file) {
    requests.push_back(RequestFromFlags(o.prompt, o.prompt_ids, o.chat, o.params, o.beam));
    return requests;
  }
  std::ifstream in(*o.requests_file);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open requests file '%s'", *o.requests_file));
  }
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<JsonRequest> r = ParseJsonRequest(line, o.params, o.beam);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request line %d: %s", line_number, r.status().message()));
    }
    requests.push_back(*std::move(r));
  }
  return requests;
}

// Writes streamed text to stdout as it arrives.
void WriteText(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Runs the one request of a command line without --requests: streams its
// text, or prints it as JSON (--json) or once done (beam search, whose best
// text can change). Returns the exit code.
int GenerateOne(const GenerateOptions& o, tandem::Client& client, const JsonRequest& request) {
  const bool stream_text = !o.json && o.params.n == 1 && !request.beam.has_value();
  std::function<void(const std::string&)> on_text;
  if (stream_text) on_text = WriteText;
  const Result r = RunOne(client, request, o.json, on_text);
  const StreamedGeneration& g = r.stream;
  if (!g.status.ok()) {
    if (stream_text) std::printf("\n");
    return Fail(DescribeStatus(g.status));
  }
  if (o.json && request.beam.has_value()) {
    std::printf("%s\n", RequestLineJson(r.prompt_token_ids, g.completions, r.top_k,
                                        g.cached_prompt_tokens, g.error, g.prompt_logprobs)
                            .dump()
                            .c_str());
  } else if (o.json) {
    for (const coordinator::Completion& c : g.completions) {
      std::printf("%s\n", CompletionJson(r.prompt_token_ids, c, r.top_k, g.cached_prompt_tokens,
                                         g.prompt_logprobs)
                               .dump()
                               .c_str());
    }
  } else if (stream_text) {
    std::printf("\n");
  } else {
    PrintCompletionsText(g.completions);
  }
  std::fflush(stdout);
  if (!g.error.empty()) return Fail("request failed: " + g.error);
  return 0;
}

// Runs every request, `concurrency` threads each taking the next one until
// none is left; results in input order.
std::vector<Result> RunAll(const GenerateOptions& o, tandem::Client& client,
                           const std::vector<JsonRequest>& requests) {
  std::vector<Result> results(requests.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const size_t num_threads = std::min<size_t>(o.concurrency, requests.size());
  for (size_t t = 0; t < num_threads; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
        results[i] = RunOne(client, requests[i], /*want_prompt_ids=*/true, nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Prints one JSON line per request in input order ({"error": ...}, and the
// error on stderr, for a failed call). Returns the exit code: 1 when any
// request failed.
int PrintResults(const std::vector<Result>& results) {
  int exit_code = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const StreamedGeneration& g = r.stream;
    if (!g.status.ok()) {
      exit_code = 1;
      std::fprintf(stderr, "tandem generate: request %zu: %s\n", i + 1,
                   DescribeStatus(g.status).c_str());
      std::printf("%s\n", json({{"error", DescribeStatus(g.status)}}).dump().c_str());
      continue;
    }
    if (!g.error.empty()) exit_code = 1;
    std::printf("%s\n", RequestLineJson(r.prompt_token_ids, g.completions, r.top_k,
                                        g.cached_prompt_tokens, g.error, g.prompt_logprobs)
                            .dump()
                            .c_str());
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace

int GenerateCommand(const GenerateOptions& o) {
  if (absl::Status s = Validate(o); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<JsonRequest>> requests = ReadRequests(o);
  if (!requests.ok()) return Fail(requests.status());
  std::unique_ptr<tandem::Client> client = NewClient(o.addr, o.timeout_s, o.tls_ca);
  if (!o.requests_file) return GenerateOne(o, *client, (*requests)[0]);
  return PrintResults(RunAll(o, *client, *requests));
}

}  // namespace tandem::client
