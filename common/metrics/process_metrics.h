// ProcessMetrics: the /metrics of a tandem-worker or tandem-draft process
// (`--metrics-port`), in Prometheus text format (prometheus-cpp), served by
// an HttpServer with this object as its handler: GET /metrics, GET /health
// (200 while serving, else 503), 404 for other paths, 405 for other methods.
// Every metric is `PREFIX_...` with the label model_name:
//   PREFIX_calls_total{result="ok"|"error"}  Step / Propose calls
//   PREFIX_call_seconds                      histogram of a call's time inside the process
//   PREFIX_forward_seconds_total             time in model forwards
//   PREFIX_sample_seconds_total              time sampling (and verifying)
//   PREFIX_tokens_computed_total             tokens the forwards computed
//   PREFIX_sequences                         sequences held now
//   PREFIX_serving                           1 while serving, 0 while draining
//
// Thread-safety: every method may be called from any thread.
#ifndef TANDEM_COMMON_METRICS_PROCESS_METRICS_H_
#define TANDEM_COMMON_METRICS_PROCESS_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "common/http/http_session.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem {

// Where one call's time went (the StepTimings a worker or draft reports).
struct CallTimings {
  double total_ms = 0;
  double forward_ms = 0;
  double sample_ms = 0;
  int64_t num_tokens = 0;
};

class ProcessMetrics final : public HttpHandler {
 public:
  // `prefix`: "tandem:worker" or "tandem:draft".
  ProcessMetrics(const std::string& prefix, const std::string& model_name);

  void OnCall(const CallTimings& timings);
  void OnCallError();
  // OnCall(timings) when `ok`, else OnCallError().
  void OnCallDone(bool ok, const CallTimings& timings) {
    ok ? OnCall(timings) : OnCallError();
  }
  void SetSequences(int64_t n);
  void SetServing(bool serving);
  // The Prometheus text exposition.
  std::string Render() const;

  void Handle(const HttpRequest& request, HttpResponder responder) override;
  HttpResponse ErrorResponse(int status, const std::string& message) override;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* calls_ok_;
  prometheus::Counter* calls_error_;
  prometheus::Histogram* call_seconds_;
  prometheus::Counter* forward_seconds_;
  prometheus::Counter* sample_seconds_;
  prometheus::Counter* tokens_;
  prometheus::Gauge* sequences_;
  prometheus::Gauge* serving_;
};

// The model_name label of a process serving `model_path`: the file's stem,
// as the coordinator names the model by default (--served-model-name);
// "none" for no model (an n-gram draft worker).
std::string ModelNameLabel(const std::string& model_path);

// `--metrics-port PORT` of `process`: nothing (null) for a port < 0; else an
// HttpServer on host:PORT (0 picks one) serving `metrics`, announced on
// stderr as "PROCESS metrics on http://HOST:PORT/metrics". UNAVAILABLE when
// the address cannot be bound; INVALID_ARGUMENT for a port over 65535.
absl::StatusOr<std::unique_ptr<HttpServer>> ServeProcessMetrics(ProcessMetrics* metrics,
                                                                const std::string& process,
                                                                const std::string& host,
                                                                int32_t port);

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_PROCESS_METRICS_H_
