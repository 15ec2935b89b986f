// The coordinator's servers: Inference over gRPC and the OpenAI-compatible
// HTTP API, from start to drain.
#ifndef TANDEM_COORDINATOR_APP_SERVE_H_
#define TANDEM_COORDINATOR_APP_SERVE_H_

#include "absl/status/status.h"
#include "coordinator/app/config.h"
#include "coordinator/app/coordinator.h"

namespace tandem::coordinator::app {

inline constexpr char kProcess[] = "tandem-coordinator";

// Prints "tandem-coordinator: STATUS" to stderr; returns the exit code 1.
int Fail(const absl::Status& s);

// Serves Inference (gRPC) and the HTTP API until SIGTERM or SIGINT, then
// drains: /ready turns 503 and the service stops admitting, in-flight gRPC
// streams and HTTP exchanges get kDrainGrace, and `c` stops. Prints the gRPC
// address line first (what launchers wait for), then the HTTP one. The
// process exit code.
int Serve(const CoordinatorConfig& config, Coordinator& c);

}  // namespace tandem::coordinator::app

#endif  // TANDEM_COORDINATOR_APP_SERVE_H_
