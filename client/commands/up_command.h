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

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::client {

struct UpOptions {
  std::string model;  // GGUF model path, required
  int32_t tp = 2;     // tensor-parallel ranks of each worker group, >= 1
  int32_t replicas = 1;  // worker groups (model replicas), in [1, 64]
  int32_t port = 0;   // the coordinator's gRPC port; 0 = the OS picks one
  // The coordinator's OpenAI-compatible HTTP port; 0 = the OS picks one,
  // -1 = no HTTP server.
  int32_t http_port = 8000;
  // Where tandem-worker and tandem-coordinator live; "" = the directory of
  // this executable (/proc/self/exe).
  std::string bin_dir;
  std::string mpirun = "mpirun";  // used when tp > 1; a name is looked up in PATH
  int32_t grace_s = 15;           // per stage of the shutdown, >= 1
  bool draft = true;              // start one tandem-draft
  std::string draft_model;        // the draft's GGUF model; "" = `model`
  std::vector<std::string> worker_args;       // appended to tandem-worker's flags
  // The draft worker's kind (tandem-draft --speculative): "ngram" (default:
  // cheap, no model), "layer-skip:L" or "model" (draft_model, or the target
  // itself); and the coordinator's --num-speculative-tokens (N or auto).
  std::string speculative = "ngram";
  std::string num_speculative_tokens = "auto";
  std::vector<std::string> draft_args;        // appended to tandem-draft's flags
  std::vector<std::string> coordinator_args;  // appended to tandem-coordinator's flags
  // The coordinator's --tls-cert / --tls-key (both or neither): its gRPC and
  // HTTP ports speak TLS; the workers' stay plaintext on loopback.
  std::string tls_cert;
  std::string tls_key;
};

// Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (call it before any
// other thread starts, so that they inherit the mask). Returns the process
// exit code: 0 after a signal-initiated shutdown, 1 when start-up fails or the
// coordinator crash-loops (the reason on stderr), 2 for invalid options.
int UpCommand(const UpOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_UP_COMMAND_H_
