// tandem-coordinator: the public Inference gRPC server and OpenAI-compatible HTTP
// API (--http-port) of a tandem cluster.
//   tandem-coordinator --model M.gguf --worker TARGET[,TARGET...]
//                      [--draft TARGET[,TARGET...]]
//                                      (tandem-worker groups, one replica each;
//                                       tandem-draft workers)
//   tandem-coordinator --model M.gguf --local              (model in-process)
// A TARGET is HOST:PORT or dns:///NAME:PORT (every address NAME resolves to,
// re-resolved every --resolve-interval-ms: replicas and drafts come and go
// without a restart; see coordinator/cluster/target_resolver.h).
// --tls-cert FILE --tls-key FILE: both public ports (gRPC and HTTP, /health,
// /ready and /metrics included) speak TLS only; the worker and draft
// connections stay plaintext.
//
// Thread model: the main thread parses flags, builds everything, starts the
// servers, prints "tandem-coordinator listening on HOST:PORT" (gRPC) and
// "tandem-coordinator HTTP listening on HOST:PORT" and then waits in
// sigwait() for SIGTERM/SIGINT (blocked in every thread). The Inference
// service runs on gRPC's callback API: gRPC's few callback threads parse,
// validate, route (Router) and submit requests, and a reactor per call streams
// its results, with no thread per call (tests/integration/
// stream_threads_test.py: at most 32 threads with 1,000 streams open); the
// OpenAI-compatible HTTP API does the same on --http-threads Boost.Asio
// threads (a session per connection on a strand, no thread per stream); one
// thread (RequestRegistry) hands the schedulers' results to the reactors and
// HTTP calls and starts their writes; one scheduler thread per worker group (SchedulerLoop) owns
// that group's Scheduler, runs every step and, when the group's worker is
// lost, reconnects it about once a second (in --local mode the model's thread
// pool runs each forward under the one loop). Two discovery threads (worker
// groups, draft workers) re-resolve the targets and add, drain and drop
// groups and drafts (WorkerGroupPool, DraftWorkerSet).
// Shutdown: health NOT_SERVING and /ready 503, refuse new requests
// (UNAVAILABLE, HTTP 503), server Shutdown with a 10 s grace deadline for
// in-flight streams, gRPC and HTTP (calls still open then are cancelled, and
// their requests with them), stop discovery,
// join the scheduler threads, exit 0.
#include "absl/status/statusor.h"
#include "common/flags/flag_help.h"
#include "common/grpc/server_lifecycle.h"
#include "coordinator/app/config.h"
#include "coordinator/app/coordinator.h"
#include "coordinator/app/serve.h"

// The parts live in coordinator/app/: config (the flags), coordinator (what
// they build), serve (the servers and the drain).
int main(int argc, char** argv) {
  using namespace tandem::coordinator::app;  // NOLINT: a main file
  tandem::BlockShutdownSignals();
  tandem::RaiseOpenFileLimit();
  const tandem::Program program{
      kProcess,
      {{"", "--model M.gguf (--worker TARGET[,TARGET...] | --local) [flags]",
        "The public Inference gRPC server and OpenAI-compatible HTTP API of a tandem cluster",
        tandem::FlagsDefinedIn(ConfigFlagsFile())}}};
  tandem::ParseCommandLineOrExit(program, argc, argv);
  absl::StatusOr<CoordinatorConfig> config = ReadConfig();
  if (!config.ok()) return Fail(config.status());
  Coordinator coordinator;
  if (absl::Status s = BuildCoordinator(*config, coordinator); !s.ok()) return Fail(s);
  return Serve(*config, coordinator);
}
