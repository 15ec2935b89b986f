// `tandem up`: a whole cluster on 127.0.0.1 in the foreground. Starts
// `replicas` target worker groups (tandem-worker; under mpirun when tp > 1),
// each on a port of its own, and one draft worker (tandem-draft, unless
// disabled) side by side, then tandem-coordinator connected to all of them
// (--worker A,B,..., --draft). Each must print its "listening on" line and
// answer grpc.health.v1 SERVING before the next stage; then it prints
// "tandem up: serving on HOST:PORT" to stdout (and each server's address to
// stderr) and stays until SIGINT or SIGTERM. Meanwhile it supervises (see
// Supervisor): a worker group or the draft worker that exits is restarted on
// the same port with exponential backoff while the coordinator keeps
// serving; a crashed coordinator is restarted too, but 3 crashes within 60 s
// stop everything (exit 1). Shutdown drains in order: the coordinator first
// (health NOT_SERVING, it finishes in-flight requests), then the worker
// groups and the draft worker together; whatever outlives its stage's grace
// period is killed, and no process is left behind.
#ifndef TANDEM_CLIENT_COMMANDS_UP_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_UP_COMMAND_H_

#include "client/up_options.h"

namespace tandem::client {

// Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (call it before any
// other thread starts, so that they inherit the mask). Returns the process
// exit code: 0 after a signal-initiated shutdown, 1 when start-up fails or the
// coordinator crash-loops (the reason on stderr), 2 for invalid options.
int UpCommand(const UpOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_UP_COMMAND_H_
