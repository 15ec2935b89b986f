#include "draft/model_proposer.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/model/cpu_model_runner.h"
#include "engine/sampling/candidate_list.h"
#include "engine/sampling/logits_processor.h"

namespace tandem::draft {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The draft `token` sampled from `row` with its q under the processed
// distribution and that distribution as support; one-hot (q = 1, no support)
// for greedy params or when `token` is outside it (the Sampler's raw-argmax
// fallback).
DraftToken DraftTokenOf(const sampling::SamplingRow& row, int32_t token, int32_t vocab_size) {
  DraftToken draft;
  draft.token = token;
  std::vector<std::pair<int32_t, float>> dist = ProcessedDistribution(row, vocab_size);
  draft.prob = dist.empty() ? 1.0f : 0.0f;
  draft.support_tokens.reserve(dist.size());
  draft.support_probs.reserve(dist.size());
  for (const auto& [id, prob] : dist) {
    if (id == draft.token) draft.prob = prob;
    draft.support_tokens.push_back(id);
    draft.support_probs.push_back(prob);
  }
  if (draft.prob == 0.0f) {  // the Sampler's raw-argmax fallback
    draft.prob = 1.0f;
    draft.support_tokens.clear();
    draft.support_probs.clear();
  }
  return draft;
}

}  // namespace

std::vector<std::pair<int32_t, float>> ProcessedDistribution(const sampling::SamplingRow& row,
                                                             int32_t vocab_size) {
  using namespace sampling;  // NOLINT: the processing stages
  const SamplingParams& p = *row.params;
  if (p.temperature < kGreedyTemperature) return {};
  std::vector<float> logits(row.logits, row.logits + vocab_size);
  std::vector<uint8_t> seen(static_cast<size_t>(vocab_size), 0);
  std::vector<int32_t> counts(static_cast<size_t>(vocab_size), 0);
  // The Sampler's stages, in its order (engine/sampling/sampler.cc).
  if (static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
    MaskTokens(logits, p.stop_token_ids);
    if (!p.ignore_eos) MaskTokens(logits, row.eos_token_ids);
  }
  ApplyRepetitionPenalty(logits, row.prompt_tokens, row.output_tokens, p.repetition_penalty, seen);
  ApplyFrequencyPresencePenalties(logits, row.output_tokens, p.frequency_penalty,
                                  p.presence_penalty, counts);
  if (p.temperature != 1.0f) ApplyTemperature(logits, p.temperature);
  std::vector<float> top_k_scratch;
  ApplyTopK(p.top_k, logits, &top_k_scratch);
  CandidateList candidates;
  candidates.Reset(logits);
  if (candidates.empty()) return {};
  candidates.ToWeights();
  ApplyTopP(p.top_p, &candidates);
  ApplyMinP(p.min_p, &candidates);
  const double total = candidates.Sum();
  std::vector<Candidate> items(candidates.items().begin(), candidates.items().end());
  std::sort(items.begin(), items.end(), CandidateBefore);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(items.size());
  for (const Candidate& c : items) {
    out.emplace_back(c.token, static_cast<float>(static_cast<double>(c.value) / total));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ModelProposer>> ModelProposer::Create(
    std::unique_ptr<model::Model> model, const ModelProposerConfig& config) {
  auto runner = std::make_unique<model::CpuModelRunner>(model.get());
  return Create(std::move(model), std::move(runner), config);
}

absl::StatusOr<std::unique_ptr<ModelProposer>> ModelProposer::Create(
    std::unique_ptr<model::Model> model, std::unique_ptr<model::ModelRunner> runner,
    const ModelProposerConfig& config) {
  kv::KvManagerConfig kv_config{config.num_blocks, config.block_size,
                                /*enable_prefix_cache=*/false};
  RETURN_IF_ERROR(kv::ValidateKvManagerConfig(kv_config));
  const model::ModelConfig& mc = model->config();
  if (config.kind != ProposerKind::kModel && config.kind != ProposerKind::kLayerSkip) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a model proposer's kind must be model or layer-skip, not %s",
        ProposerKindName(config.kind)));
  }
  for (int32_t id : config.eos_token_ids) {
    if (id < 0 || id >= mc.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "EOS token %d is out of range: must be in [0, %d)", id, mc.vocab_size));
    }
  }
  RETURN_IF_ERROR(runner->ResetKvCache(config.num_blocks, config.block_size));
  ProposerInfo info;
  info.kind = config.kind;
  info.name = config.name;
  if (info.name.empty()) {
    info.name = config.kind == ProposerKind::kLayerSkip
                    ? absl::StrFormat("layer-skip:%d:%s", mc.num_layers, mc.name)
                    : mc.name;
  }
  info.vocab_size = mc.vocab_size;
  info.context_length = mc.context_length;
  // Each held sequence takes at least one KV block.
  info.max_sequences = config.num_blocks;
  return std::unique_ptr<ModelProposer>(
      new ModelProposer(std::move(model), std::move(runner), config, std::move(info)));
}

ModelProposer::ModelProposer(std::unique_ptr<model::Model> model,
                             std::unique_ptr<model::ModelRunner> runner,
                             const ModelProposerConfig& config, ProposerInfo info)
    : model_(std::move(model)),
      runner_(std::move(runner)),
      config_(config),
      kv_manager_(kv::KvManagerConfig{config.num_blocks, config.block_size, false}),
      sampler_(model_->config().vocab_size),
      info_(std::move(info)) {}

int32_t ModelProposer::Length(SeqId seq) const {
  return kv_manager_.Contains(seq) ? kv_manager_.NumTokens(seq) : 0;
}

absl::Status ModelProposer::Validate(std::span<const ProposeInput> inputs) const {
  RETURN_IF_ERROR(ValidateProposeInputs(inputs, *this));
  for (const ProposeInput& in : inputs) {
    if (in.params == nullptr && !seqs_.contains(in.seq)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: sampling params are required on the first Propose", in.seq.value()));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelProposer::Append(SeqId seq, std::span<const int32_t> tokens) {
  const int32_t needed = kv_manager_.NumBlocksNeeded(seq, static_cast<int32_t>(tokens.size()));
  std::optional<std::vector<kv::BlockCopy>> copies = kv_manager_.AppendTokens(seq, tokens);
  if (!copies) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "draft KV cache is full: sequence %d needs %d more blocks, %d of %d are free",
        seq.value(), needed, kv_manager_.num_free_blocks(), config_.num_blocks));
  }
  if (!copies->empty()) return runner_->CopyBlocks(*copies);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<DraftToken>>> ModelProposer::ProposeBatch(
    std::span<const ProposeInput> inputs) {
  RETURN_IF_ERROR(Validate(inputs));
  last_stats_ = ProposeStats{};
  const int32_t context = model_->config().context_length;
  const size_t n = inputs.size();
  std::vector<int32_t> to_draft(n);  // tokens to draft: gamma, or less at the context's end
  for (size_t i = 0; i < n; ++i) {
    const ProposeInput& in = inputs[i];
    const int64_t end = static_cast<int64_t>(in.start_pos) + in.new_tokens.size();
    to_draft[i] = static_cast<int32_t>(std::clamp<int64_t>(context - end, 0, in.gamma));
  }
  const std::vector<Saved> saved = SaveAndRegister(inputs);

  std::vector<std::vector<DraftToken>> out(n);
  std::vector<size_t> active;  // input indices in this forward
  for (int32_t step = 0;; ++step) {
    active.clear();
    for (size_t i = 0; i < n; ++i) {
      if (step == 0 || to_draft[i] > step) active.push_back(i);
    }
    if (active.empty()) break;
    if (absl::Status drafted = DraftStep(inputs, step, active, to_draft, out); !drafted.ok()) {
      Restore(inputs, saved);
      return drafted;
    }
  }
  return out;
}

std::vector<ModelProposer::Saved> ModelProposer::SaveAndRegister(
    std::span<const ProposeInput> inputs) {
  std::vector<Saved> saved(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposeInput& in = inputs[i];
    auto it = seqs_.find(in.seq);
    saved[i] = {it == seqs_.end(), in.start_pos, it == seqs_.end() ? SeqState{} : it->second};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposeInput& in = inputs[i];
    SeqState& state = seqs_[in.seq];
    if (saved[i].was_new) {
      kv_manager_.AddSequence(in.seq, {});
      state.prompt_len = static_cast<int32_t>(in.new_tokens.size());
    }
    if (in.params != nullptr) state.params = *in.params;
  }
  return saved;
}

void ModelProposer::Restore(std::span<const ProposeInput> inputs, std::span<const Saved> saved) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const SeqId seq = inputs[i].seq;
    if (saved[i].was_new) {
      if (kv_manager_.Contains(seq)) kv_manager_.Free(seq);
      seqs_.erase(seq);
    } else {
      kv_manager_.Truncate(seq, saved[i].length);
      seqs_[seq] = saved[i].state;
    }
  }
}

absl::Status ModelProposer::DraftStep(std::span<const ProposeInput> inputs, int32_t step,
                                      std::span<const size_t> active,
                                      std::span<const int32_t> to_draft,
                                      std::vector<std::vector<DraftToken>>& out) {
  // Reserve slots first: block tables are views valid until the next append.
  std::vector<int32_t> step_starts;  // start position of each active row's tokens
  step_starts.reserve(active.size());
  for (size_t i : active) {
    const ProposeInput& in = inputs[i];
    step_starts.push_back(kv_manager_.NumTokens(in.seq));
    std::span<const int32_t> tokens =
        step == 0 ? in.new_tokens : std::span<const int32_t>(&out[i].back().token, 1);
    RETURN_IF_ERROR(Append(in.seq, tokens));
  }
  RETURN_IF_ERROR(ForwardActive(inputs, active, step_starts));
  SampleActive(inputs, step, active, to_draft, out);
  return absl::OkStatus();
}

absl::Status ModelProposer::ForwardActive(std::span<const ProposeInput> inputs,
                                          std::span<const size_t> active,
                                          std::span<const int32_t> step_starts) {
  std::vector<model::ForwardSequence> batch;
  batch.reserve(active.size());
  for (size_t a = 0; a < active.size(); ++a) {
    const SeqId seq = inputs[active[a]].seq;
    std::span<const int32_t> all = kv_manager_.Tokens(seq);
    model::ForwardSequence fs;
    fs.tokens = all.subspan(static_cast<size_t>(step_starts[a]));
    fs.start_pos = step_starts[a];
    fs.block_table = kv_manager_.BlockTable(seq);
    fs.num_logits = 1;
    batch.push_back(fs);
    last_stats_.num_tokens += static_cast<int64_t>(fs.tokens.size());
  }
  logits_.resize(active.size() * static_cast<size_t>(model_->config().vocab_size));
  auto forward_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(runner_->Forward(batch, logits_.data()));
  last_stats_.forward_ms += MsSince(forward_start);
  return absl::OkStatus();
}

void ModelProposer::SampleActive(std::span<const ProposeInput> inputs, int32_t step,
                                 std::span<const size_t> active,
                                 std::span<const int32_t> to_draft,
                                 std::vector<std::vector<DraftToken>>& out) {
  auto sample_start = std::chrono::steady_clock::now();
  const int32_t vocab = model_->config().vocab_size;
  std::vector<sampling::SamplingRow> rows;
  std::vector<size_t> sampled;  // indices into `active` of rows that draft now
  for (size_t a = 0; a < active.size(); ++a) {
    const size_t i = active[a];
    if (to_draft[i] <= step) continue;  // step 0 only: no room to draft
    const SeqState& state = seqs_.at(inputs[i].seq);
    std::span<const int32_t> all = kv_manager_.Tokens(inputs[i].seq);
    const size_t prompt_len = std::min(all.size(), static_cast<size_t>(state.prompt_len));
    sampling::SamplingRow row;
    row.logits = logits_.data() + a * static_cast<size_t>(vocab);
    row.params = &state.params;
    row.prompt_tokens = all.first(prompt_len);
    row.output_tokens = all.subspan(prompt_len);
    row.seed = inputs[i].seed;
    row.stream = inputs[i].stream;
    row.eos_token_ids = config_.eos_token_ids;
    rows.push_back(row);
    sampled.push_back(a);
  }
  std::vector<sampling::SampleResult> results(rows.size());
  sampler_.SampleBatch(rows, results, model_->pool());
  for (size_t r = 0; r < rows.size(); ++r) {
    out[active[sampled[r]]].push_back(DraftTokenOf(rows[r], results[r].token, vocab));
  }
  last_stats_.sample_ms += MsSince(sample_start);
}

absl::Status ModelProposer::Release(SeqId seq, int32_t keep_length) {
  const int32_t length = Length(seq);
  if (keep_length < 0 || keep_length > length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: keep_length %d is out of range: must be in [0, %d] (the tokens the draft "
        "holds)",
        seq.value(), keep_length, length));
  }
  if (!kv_manager_.Contains(seq)) return absl::OkStatus();
  if (keep_length == 0) {
    kv_manager_.Free(seq);
    seqs_.erase(seq);
    return absl::OkStatus();
  }
  kv_manager_.Truncate(seq, keep_length);
  SeqState& state = seqs_.at(seq);
  state.prompt_len = std::min(state.prompt_len, keep_length);
  return absl::OkStatus();
}

}  // namespace tandem::draft
