// OpenAiApi: the coordinator's HTTP API, with vLLM's paths and shapes:
//   POST /v1/completions, /v1/chat/completions   generation (GenerationCall)
//   GET  /v1/models                              the served model
//   POST /tokenize, /detokenize; GET /tokenizer_info   the model's tokenizer
//   GET  /health    200 while a worker group serves, else 503
//   GET  /ready     200 while admitting with a serving group; 503 from
//                   SIGTERM (StopAdmitting) on, and while no group serves
//   GET  /metrics   Prometheus text (the MetricsSource given)
// An unknown path is 404, a known one with the wrong method 405 (with Allow);
// errors have OpenAI's shape (openai_error.h).
//
// Thread-safety: Handle runs on the HTTP server's I/O threads, concurrently;
// the object is immutable after construction.
#ifndef TANDEM_COORDINATOR_HTTP_OPENAI_API_H_
#define TANDEM_COORDINATOR_HTTP_OPENAI_API_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/api_key.h"
#include "common/http/http_session.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/service/request_admission.h"

namespace tandem::coordinator::http {

// Prompts one completions request may batch.
inline constexpr int32_t kMaxBatchPrompts = 256;

struct ApiOptions {
  // The `model` requests must name (vLLM's --served-model-name); responses
  // carry it.
  std::string served_model_name;
  // Renders /metrics (Prometheus text format); empty → 404.
  std::function<std::string()> metrics;
  // What every path but /health and /ready (and /metrics unless
  // metrics_need_key) requires in "Authorization: Bearer KEY"; a request
  // without it is answered 401 and never reaches the scheduler.
  ApiKey api_key;
  bool metrics_need_key = false;
};

class OpenAiApi final : public HttpHandler {
 public:
  // `admission` must outlive the API.
  OpenAiApi(RequestAdmission* admission, ApiOptions options);

  void Handle(const HttpRequest& request, HttpResponder responder) override;
  HttpResponse ErrorResponse(int status, const std::string& message) override;

 private:
  void Generate(ApiKind kind, const HttpRequest& request, const HttpResponder& responder);
  // The native requests (ids, prompts, engine logprobs) of `r`, one per
  // prompt; INVALID_ARGUMENT naming a bad prompt or value.
  absl::StatusOr<std::vector<GenerateRequest>> NativeRequests(const OpenAiRequest& r);
  absl::StatusOr<std::vector<std::vector<int32_t>>> PromptTokens(const OpenAiRequest& r) const;
  // 401 for a request to `path` without the API key it needs; nullopt when
  // it may go on.
  std::optional<HttpResponse> Unauthorized(std::string_view path, const HttpRequest& request) const;
  HttpResponse Models() const;
  HttpResponse Health() const;
  HttpResponse Ready() const;
  HttpResponse TokenizerInfo() const;
  HttpResponse Tokenize(const std::string& body) const;
  HttpResponse Detokenize(const std::string& body) const;
  HttpResponse Metrics() const;

  RequestAdmission* const admission_;
  const ApiOptions options_;
  const int64_t created_;  // Unix seconds the API came up (the model's "created")
};

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_OPENAI_API_H_
