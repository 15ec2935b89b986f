#include "common/metrics/process_metrics.h"

#include <cstdio>
#include <filesystem>
#include <utility>

#include "absl/strings/str_format.h"
#include "prometheus/text_serializer.h"

namespace tandem {
namespace {

namespace beast_http = boost::beast::http;
using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Step times from a fraction of a millisecond (a decode step of a small
// model on a GPU) to seconds (a long prefill on a CPU).
const prometheus::Histogram::BucketBoundaries kCallBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};

HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

}  // namespace

ProcessMetrics::ProcessMetrics(const std::string& prefix, const std::string& model_name)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  const prometheus::Labels model = {{"model_name", model_name}};
  auto& calls = BuildCounter().Name(prefix + "_calls_total").Help("Calls by result").Register(r);
  calls_ok_ = &calls.Add({{"model_name", model_name}, {"result", "ok"}});
  calls_error_ = &calls.Add({{"model_name", model_name}, {"result", "error"}});
  call_seconds_ = &BuildHistogram().Name(prefix + "_call_seconds")
                       .Help("Time of one call inside the process").Register(r)
                       .Add(model, kCallBuckets);
  forward_seconds_ = &BuildCounter().Name(prefix + "_forward_seconds_total")
                          .Help("Time in model forwards").Register(r).Add(model);
  sample_seconds_ = &BuildCounter().Name(prefix + "_sample_seconds_total")
                         .Help("Time sampling and verifying").Register(r).Add(model);
  tokens_ = &BuildCounter().Name(prefix + "_tokens_computed_total")
                 .Help("Tokens the forwards computed").Register(r).Add(model);
  sequences_ = &BuildGauge().Name(prefix + "_sequences")
                    .Help("Sequences held").Register(r).Add(model);
  serving_ = &BuildGauge().Name(prefix + "_serving")
                  .Help("1 while serving, 0 while draining").Register(r).Add(model);
  serving_->Set(1);
}

void ProcessMetrics::OnCall(const CallTimings& t) {
  calls_ok_->Increment();
  call_seconds_->Observe(t.total_ms / 1e3);
  forward_seconds_->Increment(t.forward_ms / 1e3);
  sample_seconds_->Increment(t.sample_ms / 1e3);
  tokens_->Increment(static_cast<double>(t.num_tokens));
}

void ProcessMetrics::OnCallError() { calls_error_->Increment(); }

void ProcessMetrics::SetSequences(int64_t n) { sequences_->Set(static_cast<double>(n)); }

void ProcessMetrics::SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }

std::string ProcessMetrics::Render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void ProcessMetrics::Handle(const HttpRequest& request, HttpResponder responder) {
  const std::string_view path(request.target().data(), request.target().size());
  const bool known = path == "/metrics" || path == "/health";
  if (!known) return responder.Respond(Text(404, "unknown path; this process serves /metrics"));
  if (request.method() != beast_http::verb::get) {
    HttpResponse r = Text(405, "only GET is allowed here");
    r.headers.emplace_back("Allow", "GET");
    return responder.Respond(std::move(r));
  }
  if (path == "/health") {
    const bool serving = serving_->Value() > 0;
    return responder.Respond(Text(serving ? 200 : 503, serving ? "serving" : "draining"));
  }
  HttpResponse r = Text(200, Render());
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  responder.Respond(std::move(r));
}

HttpResponse ProcessMetrics::ErrorResponse(int status, const std::string& message) {
  return Text(status, message);
}

std::string ModelNameLabel(const std::string& model_path) {
  if (model_path.empty()) return "none";
  return std::filesystem::path(model_path).stem().string();
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeProcessMetrics(ProcessMetrics* metrics,
                                                                const std::string& process,
                                                                const std::string& host,
                                                                int32_t port) {
  if (port < 0) return std::unique_ptr<HttpServer>();
  if (port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--metrics-port %d is out of range: must be in [0, 65535] (or -1: off)", port));
  }
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(host, port, metrics, HttpLimits{}, /*num_threads=*/1);
  if (server.ok()) {
    std::fprintf(stderr, "%s metrics on http://%s/metrics\n", process.c_str(),
                 (*server)->address().c_str());
  }
  return server;
}

}  // namespace tandem
