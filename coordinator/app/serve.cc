#include "coordinator/app/serve.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_server.h"
#include "common/grpc/server_lifecycle.h"
#include "common/http/http_server.h"

namespace tandem::coordinator::app {
namespace {

constexpr char kServiceName[] = "tandem.v1.Inference";
// In-flight streams get this long after SIGTERM.
constexpr absl::Duration kDrainGrace = absl::Seconds(10);

}  // namespace

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", kProcess, s.ToString().c_str());
  return 1;
}

// Serves Inference (gRPC) and the HTTP API until SIGTERM or SIGINT, then
// drains: /ready turns 503 and the service stops admitting, in-flight gRPC
// streams and HTTP exchanges get kDrainGrace, and `c` stops. Prints the gRPC
// address line first (what launchers wait for), then the HTTP one. The
// process exit code.
int Serve(const CoordinatorConfig& config, Coordinator& c) {
  std::unique_ptr<HttpServer> http;
  if (config.http_port >= 0) {
    absl::StatusOr<std::unique_ptr<HttpServer>> started_http =
        HttpServer::Start(config.host, config.http_port, c.http_api.get(), config.http_limits,
                          config.http_threads, config.tls);
    if (!started_http.ok()) return Fail(started_http.status());
    http = *std::move(started_http);
  }
  absl::StatusOr<GrpcServer> started =
      StartGrpcServer(config.host, config.port, {c.service.get()}, {kServiceName}, config.tls);
  if (!started.ok()) return Fail(started.status());
  AnnounceListening(kProcess, started->address);
  if (http != nullptr) AnnounceListening(absl::StrCat(kProcess, " HTTP"), http->address());
  absl::Time drain_start = absl::InfiniteFuture();
  ServeUntilShutdownSignal(kProcess, *started->server, kDrainGrace, [&c, &drain_start] {
    drain_start = absl::Now();
    c.admission->StopAdmitting();
  });
  if (http != nullptr) {
    if (!http->WaitForExchanges(drain_start + kDrainGrace)) {
      std::fprintf(stderr, "%s: %lld HTTP requests still open after the drain grace; closing\n",
                   kProcess, static_cast<long long>(http->num_open_exchanges()));
    }
    http->Stop();
  }
  c.Stop();
  std::fprintf(stderr, "%s: stopped\n", kProcess);
  return 0;
}

}  // namespace tandem::coordinator::app
