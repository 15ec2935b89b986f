// `tandem run`: the single-process tool. Loads the model in-process, runs one
// prompt or a JSONL file of requests through the coordinator's scheduler over
// a LocalWorkerGroup (continuous batching), streams text or prints JSON.
#ifndef TANDEM_CLIENT_COMMANDS_RUN_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_RUN_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "coordinator/api/beam_search_params.h"
#include "engine/options/engine_options.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::client {

struct RunOptions {
  std::string model_path;
  std::optional<std::string> prompt;
  std::optional<std::string> chat;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<std::string> requests_file;  // JSONL, one request per line
  sampling::SamplingParams params;
  // Beam flags (--num-beams ...): the defaults of every request; beam search
  // runs when num_beams > 1 or num_beam_groups > 1.
  coordinator::BeamSearchParams beam;
  bool json = false;
  // Threads, precision, KV sizing and the device (engine/options/engine_flags.h).
  engine::EngineOptions engine;
  int32_t max_num_batched_tokens = 1024;
  int32_t max_num_seqs = 256;
  bool enable_prefix_cache = true;
  // Speculative decoding with an in-process draft: "" (off), "ngram",
  // "layer-skip:L" or "model[:PATH]" (draft/speculative_spec.h), and the
  // draft tokens per round (0 = auto).
  std::string speculative;
  int32_t num_speculative_tokens = 0;
};

// Returns the process exit code: 0 on success, 1 when the model or a request
// is rejected (the error is printed to stderr, naming the value and the limit).
int RunCommand(const RunOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_RUN_COMMAND_H_
