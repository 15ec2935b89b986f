// ModelProposer: the draft model of speculative decoding. It owns a Model, its
// own paged KV cache (KvManager bookkeeping + KvStorage pages: a draft worker
// is not coordinated by the coordinator's KV manager) and a Sampler, and keeps
// per sequence the token history, the sampling params and the K/V.
//
// Contract of one sequence (L = the length the draft holds, Length()):
//   Propose(seq, new_tokens, start_pos, gamma): start_pos must equal L (0 for
//   a sequence it does not hold). The draft appends new_tokens (computing
//   their K/V), then drafts up to gamma tokens one forward at a time; the K/V
//   of every drafted token except the last is kept. Afterwards
//   L = start_pos + len(new_tokens) + (number drafted) - 1.
//   Release(seq, keep_length): rolls back to keep_length <= L (the accepted
//   prefix; the coordinator sends the tokens past it, including the target's
//   bonus/correction token, with the next Propose), or forgets the sequence
//   when keep_length == 0.
// Fewer than gamma tokens are drafted only when the context runs out.
//
// Sampling: params (with the seed and stream) are those of the target for the
// sequence. The first Propose's new_tokens count as the prompt (repetition
// penalty), everything after as output (penalties, min_tokens, RNG step), so
// with the target's model as draft a sampled proposal equals the target's own
// sample. Each token's q is its probability under the processed distribution
// (min-tokens mask, penalties, temperature, top-k, top-p, min-p); greedy
// (temperature 0) gives q = 1 with an empty support (one-hot).
//
// A failed Propose leaves its sequences as they were (a new one is
// forgotten). Thread-safety: none; one caller at a time (the service's mutex).
#ifndef TANDEM_DRAFT_MODEL_PROPOSER_H_
#define TANDEM_DRAFT_MODEL_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "engine/kv/kv_manager.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::draft {

// One proposed token.
struct DraftToken {
  int32_t token = -1;
  float prob = 1.0f;  // q(token) under the processed distribution
  // The processed distribution over its support (canonical order); empty for
  // greedy, meaning one-hot at `token`.
  std::vector<int32_t> support_tokens;
  std::vector<float> support_probs;
};

// The processed distribution the Sampler draws `row` from (stages of
// logits_processor.h), as (token, probability) pairs over the surviving
// candidates in canonical order, probabilities summing to 1. Empty for greedy
// params or when nothing survives. `row.params` must be validated.
std::vector<std::pair<int32_t, float>> ProcessedDistribution(const sampling::SamplingRow& row,
                                                             int32_t vocab_size);

struct ModelProposerConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  std::vector<int32_t> eos_token_ids;  // masked while output < min_tokens
};

// One sequence's input to ProposeBatch.
struct ProposeInput {
  SeqId seq;
  std::span<const int32_t> new_tokens;
  int32_t start_pos = 0;
  int32_t gamma = 1;
  // Null: reuse the sequence's params (InvalidArgument for a new sequence).
  const sampling::SamplingParams* params = nullptr;
  uint64_t seed = 0;
  uint64_t stream = 0;
};

class ModelProposer {
 public:
  // Creates the KV storage (config.num_blocks blocks of the model's shape).
  // InvalidArgument for bad geometry (naming value and limit); passes on
  // KvStorage::Create's ResourceExhausted.
  static absl::StatusOr<std::unique_ptr<ModelProposer>> Create(
      std::unique_ptr<model::Model> model, const ModelProposerConfig& config);

  ModelProposer(const ModelProposer&) = delete;
  ModelProposer& operator=(const ModelProposer&) = delete;

  // See the contract above. InvalidArgument names the offending value and
  // limit (start_pos != Length, empty new_tokens, gamma < 1, token out of
  // range, missing or invalid params, duplicate seq); ResourceExhausted names
  // the blocks needed and free.
  absl::StatusOr<std::vector<DraftToken>> Propose(SeqId seq, std::span<const int32_t> new_tokens,
                                                  int32_t start_pos, int32_t gamma,
                                                  const sampling::SamplingParams* params,
                                                  uint64_t seed, uint64_t stream);
  // Several sequences at once: one forward per drafting step over all of
  // them. Validates everything before changing state; on a later failure
  // every sequence of the batch is restored. Results in input order.
  absl::StatusOr<std::vector<std::vector<DraftToken>>> ProposeBatch(
      std::span<const ProposeInput> inputs);

  // Rolls `seq` back to keep_length tokens, or forgets it at 0 (a sequence it
  // does not hold is fine at 0). InvalidArgument when keep_length < 0 or
  // > Length(seq), naming both.
  absl::Status Release(SeqId seq, int32_t keep_length);

  // Tokens whose K/V the draft holds for `seq` (0 when unknown).
  int32_t Length(SeqId seq) const;
  const model::Model& model() const { return *model_; }
  int32_t num_blocks() const { return config_.num_blocks; }
  int32_t num_sequences() const { return kv_manager_.num_sequences(); }
  kv::KvStats kv_stats() const { return kv_manager_.stats(); }

  // Where the last ProposeBatch's time went.
  struct ProposeStats {
    double forward_ms = 0;
    double sample_ms = 0;
    int64_t num_tokens = 0;  // tokens whose K/V the forwards computed
  };
  const ProposeStats& last_stats() const { return last_stats_; }

 private:
  struct SeqState {
    int32_t prompt_len = 0;
    sampling::SamplingParams params;
  };
  ModelProposer(std::unique_ptr<model::Model> model, const ModelProposerConfig& config,
                std::unique_ptr<kv::KvStorage> storage);
  absl::Status Validate(std::span<const ProposeInput> inputs) const;
  // Reserves slots for tokens of `seq`; ResourceExhausted when out of blocks.
  absl::Status Append(SeqId seq, std::span<const int32_t> tokens);

  std::unique_ptr<model::Model> model_;
  ModelProposerConfig config_;
  std::unique_ptr<kv::KvStorage> storage_;
  kv::KvManager kv_manager_;
  sampling::Sampler sampler_;
  absl::flat_hash_map<SeqId, SeqState> seqs_;
  std::vector<float> logits_;
  ProposeStats last_stats_;
};

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_MODEL_PROPOSER_H_
