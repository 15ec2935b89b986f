// MakeProposer: builds the Proposer of a --speculative spec, for the draft
// worker (tandem-draft) and for the coordinator's in-process draft pool
// (tandem run), so both wire a kind the same way:
//   model         ModelProposer over the draft GGUF (spec.model_path, else
//                 target_model_path: the target drafting for itself)
//   layer-skip:L  ModelProposer over target_model_path loaded with only its
//                 first L layers (ModelOptions::num_layers = L)
//   ngram         NgramProposer; no model is loaded. Its vocabulary size and
//                 context length come from target_model_path's GGUF metadata
//                 when one is given (no weights are read), else vocab_size
//                 (required then) and kDefaultNgramContextLength.
// Thread-safety: MakeProposer may run on any thread; it shares nothing.
#ifndef TANDEM_DRAFT_PROPOSER_FACTORY_H_
#define TANDEM_DRAFT_PROPOSER_FACTORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "draft/ngram_proposer.h"
#include "draft/api/proposer.h"
#include "draft/api/speculative_spec.h"
#include "engine/device/device_options.h"
#include "engine/model/model.h"

namespace tandem::draft {

struct ProposerOptions {
  SpeculativeSpec spec;
  // The target's GGUF (see above for its use by each kind).
  std::string target_model_path;

  // Model kinds. Precision and threads of the draft's forward; num_layers
  // is set from the spec (must be 0 here) and tensor parallelism must stay
  // off (a draft runs whole on one process).
  model::ModelOptions model_options;
  int32_t block_size = 16;
  int32_t kv_blocks = 0;                   // > 0: exactly this many blocks
  int64_t kv_cache_bytes = 256ll << 20;    // used when kv_blocks == 0 on the CPU
  // Where the draft model runs (--device of tandem-draft); on a GPU the cache
  // is sized from device.cuda.gpu_memory_fraction when kv_blocks == 0.
  device::DeviceChoice device;
  // End-of-generation ids masked while output < min_tokens (the target's);
  // unset: read from the loaded GGUF's vocabulary.
  std::optional<std::vector<int32_t>> eos_token_ids;

  // Kind ngram.
  int32_t vocab_size = 0;  // required without target_model_path; else 0 or equal to its
  int32_t ngram_min_n = 1;
  int32_t ngram_max_n = 4;
  int32_t ngram_max_sequences = kDefaultNgramMaxSequences;
};

// InvalidArgument naming the offending option and its limit (no model path
// for a model kind, L beyond the target's layers, n-gram bounds, a vocab_size
// disagreeing with the model's); passes on Model::Load's NotFound /
// InvalidArgument naming the path and the KV budget's errors.
absl::StatusOr<std::unique_ptr<Proposer>> MakeProposer(const ProposerOptions& options);

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_PROPOSER_FACTORY_H_
