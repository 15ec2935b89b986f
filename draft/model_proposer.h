// ModelProposer: the Proposer (proposer.h) that drafts with a model — a
// separate small GGUF model sharing the target's vocabulary (kind model), or
// the target itself truncated to its first L layers (kind layer-skip: a Model
// loaded with ModelOptions::num_layers = L). It owns the Model, the
// ModelRunner that computes it (CPU or GPU), its own paged KV cache (KvManager
// bookkeeping + the runner's pages: a draft worker is not
// coordinated by the coordinator's KV manager) and a Sampler, and keeps per
// sequence the token history, the sampling params and the K/V.
//
// It follows the sequence contract of proposer.h: the K/V of every drafted
// token except the last is kept. It drafts fewer than gamma tokens only when
// the context runs out.
//
// Sampling: params (with the seed and stream) are those of the target for the
// sequence; they are required on a sequence's first Propose. The first
// Propose's new_tokens count as the prompt (repetition penalty), everything
// after as output (penalties, min_tokens, RNG step), so with the target's
// model as draft a sampled proposal equals the target's own sample. Each
// token's q is its probability under the processed distribution (min-tokens
// mask, penalties, temperature, top-k, top-p, min-p); greedy (temperature 0)
// gives q = 1 with an empty support (one-hot).
//
// A failed Propose leaves its sequences as they were (a new one is
// forgotten). Thread-safety: none; one caller at a time (the service's mutex).
#ifndef TANDEM_DRAFT_MODEL_PROPOSER_H_
#define TANDEM_DRAFT_MODEL_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "draft/api/proposer.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::draft {

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
  // What info() reports: kModel or kLayerSkip (the Model then runs fewer
  // layers than its GGUF holds, see ModelOptions::num_layers).
  ProposerKind kind = ProposerKind::kModel;
  // info().name; empty: the model's general.name for kModel,
  // "layer-skip:L:<general.name>" for kLayerSkip.
  std::string name;
};

class ModelProposer final : public Proposer {
 public:
  // Resets `runner`'s KV cache (config.num_blocks blocks of the model's
  // shape: config().num_layers layers, so a layer-skip model's cache holds
  // only its L layers); `runner` computes `model`. InvalidArgument for bad
  // geometry or a kind that is not a model kind (naming value and limit);
  // passes on ResetKvCache's ResourceExhausted.
  static absl::StatusOr<std::unique_ptr<ModelProposer>> Create(
      std::unique_ptr<model::Model> model, std::unique_ptr<model::ModelRunner> runner,
      const ModelProposerConfig& config);
  // The same on the CPU (a CpuModelRunner).
  static absl::StatusOr<std::unique_ptr<ModelProposer>> Create(
      std::unique_ptr<model::Model> model, const ModelProposerConfig& config);

  ModelProposer(const ModelProposer&) = delete;
  ModelProposer& operator=(const ModelProposer&) = delete;

  const ProposerInfo& info() const override { return info_; }
  // See proposer.h. One forward per drafting step over all sequences; on a
  // failure after validation every sequence of the batch is restored.
  // ResourceExhausted names the blocks needed and free.
  absl::StatusOr<std::vector<std::vector<DraftToken>>> ProposeBatch(
      std::span<const ProposeInput> inputs) override;
  absl::Status Release(SeqId seq, int32_t keep_length) override;
  // Tokens whose K/V the draft holds for `seq` (0 when unknown).
  int32_t Length(SeqId seq) const override;
  int32_t num_sequences() const override { return kv_manager_.num_sequences(); }
  const ProposeStats& last_stats() const override { return last_stats_; }

  const model::Model& model() const { return *model_; }
  int32_t num_blocks() const { return config_.num_blocks; }
  kv::KvStats kv_stats() const { return kv_manager_.stats(); }

 private:
  struct SeqState {
    int32_t prompt_len = 0;
    sampling::SamplingParams params;
  };
  ModelProposer(std::unique_ptr<model::Model> model, std::unique_ptr<model::ModelRunner> runner,
                const ModelProposerConfig& config, ProposerInfo info);
  absl::Status Validate(std::span<const ProposeInput> inputs) const;
  // Reserves slots for tokens of `seq`; ResourceExhausted when out of blocks.
  absl::Status Append(SeqId seq, std::span<const int32_t> tokens);

  // ProposeBatch's parts, in order.
  // A sequence's state before a ProposeBatch, put back when it fails.
  struct Saved {
    bool was_new = false;
    int32_t length = 0;  // tokens held (the input's start_pos)
    SeqState state;
  };
  // Saves every input sequence's state, then registers the new ones (their
  // new_tokens are the prompt) and takes the params the inputs give.
  std::vector<Saved> SaveAndRegister(std::span<const ProposeInput> inputs);
  // Puts the input sequences back as `saved` says (a new one is forgotten).
  void Restore(std::span<const ProposeInput> inputs, std::span<const Saved> saved);
  // One drafting step over inputs[active]: appends each one's tokens (step
  // 0: its new tokens; later: its last draft), runs one forward and drafts
  // the next token of those with room (to_draft[i] > step) into out[i].
  // Passes on Append's and the forward's errors (the caller restores).
  absl::Status DraftStep(std::span<const ProposeInput> inputs, int32_t step,
                         std::span<const size_t> active, std::span<const int32_t> to_draft,
                         std::vector<std::vector<DraftToken>>& out);
  // The forward over inputs[active]'s tokens from `step_starts` (one logits
  // row each, into logits_); counts its time and tokens in last_stats_.
  absl::Status ForwardActive(std::span<const ProposeInput> inputs, std::span<const size_t> active,
                             std::span<const int32_t> step_starts);
  // Samples a draft from each active row with room (to_draft[i] > step) and
  // appends it to out[i]; counts the time in last_stats_.
  void SampleActive(std::span<const ProposeInput> inputs, int32_t step,
                    std::span<const size_t> active, std::span<const int32_t> to_draft,
                    std::vector<std::vector<DraftToken>>& out);

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::ModelRunner> runner_;  // computes model_
  ModelProposerConfig config_;
  kv::KvManager kv_manager_;
  sampling::Sampler sampler_;
  const ProposerInfo info_;
  absl::flat_hash_map<SeqId, SeqState> seqs_;
  std::vector<float> logits_;
  ProposeStats last_stats_;
};

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_MODEL_PROPOSER_H_
