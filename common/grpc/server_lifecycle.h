// The life of every tandem server process (tandem-worker, tandem-draft,
// tandem-coordinator) around its gRPC server (DESIGN.md, Lifecycle):
//
//   int main(...) {
//     BlockShutdownSignals();            // before any thread exists
//     ... read and validate flags, build the services ...
//     StartGrpcServer(...);              // common/grpc/grpc_server.h
//     AnnounceListening("tandem-x", address);
//     ServeUntilShutdownSignal("tandem-x", server, grace, stop_admitting);
//     ... join the process's own threads, exit 0 ...
//   }
//
// SIGTERM and SIGINT are blocked in every thread, so no handler ever runs
// asynchronously: one thread takes them with sigwait(). On one, the drain
// runs in DESIGN.md's order: health NOT_SERVING (load balancers and the
// coordinator stop sending), the process stops admitting new work, the
// server shuts down with a grace deadline (in-flight calls finish or are
// cancelled), and waits for its handlers to return.
#ifndef TANDEM_COMMON_GRPC_SERVER_LIFECYCLE_H_
#define TANDEM_COMMON_GRPC_SERVER_LIFECYCLE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

// Blocks SIGTERM and SIGINT in the calling thread. Call it first in main(),
// before any thread exists (gRPC's, a model's pool, MPI's), so that every
// thread inherits the mask and only WaitForShutdownSignal() receives them.
void BlockShutdownSignals();

// Raises the soft RLIMIT_NOFILE to the hard limit (a server holds a socket
// per connection; the usual soft default of 1,024 runs out under a few
// hundred idle clients) and returns the soft limit now in force. Call it at
// start-up, before serving.
int64_t RaiseOpenFileLimit();

// Waits until SIGTERM or SIGINT is delivered; returns its number. Requires
// BlockShutdownSignals() first (else the default action kills the process).
int WaitForShutdownSignal();

// Prints the one stdout line "`process` listening on `address`" that
// launchers (tandem up, the tests) wait for, and flushes it.
void AnnounceListening(std::string_view process, std::string_view address);

// Drains `server`: health (the server and every named service) →
// NOT_SERVING, then `stop_admitting` (may be empty: the process's services
// refuse new work), then Shutdown with `grace` as the deadline for in-flight
// calls, then Wait for every handler to return.
void DrainGrpcServer(grpc::Server& server, absl::Duration grace,
                     const std::function<void()>& stop_admitting);

// WaitForShutdownSignal(), logs "`process`: SIGNAL received, draining" to
// stderr, then DrainGrpcServer(). Returns the signal's number once drained.
int ServeUntilShutdownSignal(std::string_view process, grpc::Server& server,
                             absl::Duration grace, const std::function<void()>& stop_admitting);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_SERVER_LIFECYCLE_H_
