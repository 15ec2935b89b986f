// UpOptions: what `tandem up` starts (client/commands/up_command.h), as its
// flags and its --config file (client/up_config.h) set it.
#ifndef TANDEM_CLIENT_UP_OPTIONS_H_
#define TANDEM_CLIENT_UP_OPTIONS_H_

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

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_UP_OPTIONS_H_
