#include "worker/step_executor.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/model/cpu_model_runner.h"

namespace tandem::worker {
namespace {
double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// A beam's history is what the coordinator chose: the step's tokens past the
// prompt. `s.start_pos` is the length the coordinator keeps, so `output`
// (the history past the prompt's `prompt_size` tokens) past it — drafts of an
// earlier step that the search did not follow — is dropped first; then the
// step's tokens not yet in the history are appended.
void SyncBeamHistory(const SequenceStep& s, size_t prompt_size, std::vector<int32_t>& output) {
  const int64_t keep = s.start_pos - static_cast<int64_t>(prompt_size);
  if (keep >= 0 && keep < static_cast<int64_t>(output.size())) {
    output.resize(static_cast<size_t>(keep));
  }
  const int64_t known = static_cast<int64_t>(prompt_size + output.size());
  for (size_t k = 0; k < s.tokens.size(); ++k) {
    if (s.start_pos + static_cast<int64_t>(k) >= known) output.push_back(s.tokens[k]);
  }
}
}  // namespace

absl::StatusOr<std::unique_ptr<StepExecutor>> StepExecutor::Create(
    model::ModelRunner* runner, const StepExecutorConfig& config) {
  RETURN_IF_ERROR(runner->ResetKvCache(config.num_blocks, config.block_size));
  return std::unique_ptr<StepExecutor>(new StepExecutor(runner, nullptr, config));
}

absl::StatusOr<std::unique_ptr<StepExecutor>> StepExecutor::Create(
    model::Model* model, const StepExecutorConfig& config) {
  auto runner = std::make_unique<model::CpuModelRunner>(model);
  RETURN_IF_ERROR(runner->ResetKvCache(config.num_blocks, config.block_size));
  model::ModelRunner* borrowed = runner.get();
  return std::unique_ptr<StepExecutor>(new StepExecutor(borrowed, std::move(runner), config));
}

StepExecutor::StepExecutor(model::ModelRunner* runner,
                           std::unique_ptr<model::ModelRunner> owned_runner,
                           const StepExecutorConfig& config)
    : owned_runner_(std::move(owned_runner)),
      runner_(runner),
      model_(&runner->model()),
      config_(config),
      sampler_(model_->config().vocab_size),
      verifier_(model_->config().vocab_size) {}

absl::StatusOr<StepResult> StepExecutor::Execute(const StepPlan& plan) {
  auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.step_id = plan.step_id;
  RETURN_IF_ERROR(ApplyPlanBookkeeping(plan));
  if (plan.sequences.empty()) {
    result.timings.total_ms = MillisSince(start);
    return result;
  }
  ASSIGN_OR_RETURN(std::vector<SequenceState*> states, BuildBatch(plan));
  if (!config_.sample) {
    RETURN_IF_ERROR(RunForward(plan, nullptr, result.timings));
    result.timings.total_ms = MillisSince(start);
    return result;
  }
  const int64_t rows = model::Model::NumLogitRows(batch_);
  logits_.resize(std::max<int64_t>(1, rows) * model_->config().vocab_size);
  // Plain rows go to the sampler, rows with drafts to the verifier; both
  // read the histories as they were before this step, which are extended
  // only once every row is done.
  std::vector<sampling::SamplingRow> sample_rows;
  std::vector<sampling::VerifyRow> verify_rows;
  std::vector<sampling::SampleResult> samples;
  std::vector<sampling::VerifyResult> verified;
  std::chrono::steady_clock::time_point sample_start;
  if (SamplesOnDevice(plan)) {
    // Before the forward: BuildRows' only side effect, a beam's history made
    // the coordinator's, is the same when a failed step is retried.
    BuildRows(plan, states, sample_rows, verify_rows);
    const size_t num_plain = sample_rows.size();
    std::vector<std::vector<int32_t>> histories;
    AppendVerifyPositions(verify_rows, sample_rows, histories);
    samples.resize(sample_rows.size());
    RETURN_IF_ERROR(ForwardSampleOnDevice(plan, sample_rows, samples, result.timings));
    sample_start = std::chrono::steady_clock::now();
    verified = FoldVerifyPositions(verify_rows, std::span(samples).subspan(num_plain));
    samples.resize(num_plain);
  } else {
    RETURN_IF_ERROR(RunForward(plan, logits_.data(), result.timings));
    sample_start = std::chrono::steady_clock::now();
    BuildRows(plan, states, sample_rows, verify_rows);
    samples.resize(sample_rows.size());
    sampler_.SampleBatch(sample_rows, samples, model_->pool());
    verified.resize(verify_rows.size());
    verifier_.VerifyBatch(verify_rows, verified, model_->pool());
  }
  result.results = CollectResults(plan, states, samples, verified);
  result.prompt_logprobs = ScorePrompts(plan, states);
  result.timings.sample_ms = MillisSince(sample_start);
  result.timings.total_ms = MillisSince(start);
  return result;
}

bool StepExecutor::SamplesOnDevice(const StepPlan& plan) const {
  if (!runner_->samples_on_device()) return false;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    if (prompt_rows_[i] > 0) return false;
  }
  return true;
}

void StepExecutor::AppendVerifyPositions(std::span<const sampling::VerifyRow> verify_rows,
                                         std::vector<sampling::SamplingRow>& rows,
                                         std::vector<std::vector<int32_t>>& histories) {
  const int64_t vocab = model_->config().vocab_size;
  histories.reserve(verify_rows.size());  // rows view them: no reallocation
  for (const sampling::VerifyRow& v : verify_rows) {
    std::vector<int32_t>& history = histories.emplace_back(v.target.output_tokens.begin(),
                                                           v.target.output_tokens.end());
    history.insert(history.end(), v.draft_tokens.begin(), v.draft_tokens.end());
    const size_t before = v.target.output_tokens.size();
    for (size_t i = 0; i <= v.draft_tokens.size(); ++i) {
      // Position i: the target's logits after draft i, the history through it.
      sampling::SamplingRow at = v.target;
      at.logits = v.target.logits + static_cast<int64_t>(i) * vocab;
      at.output_tokens = std::span<const int32_t>(history).first(before + i);
      if (i < v.draft_tokens.size()) {
        at.draft_token = v.draft_tokens[i];
        at.draft_probs = &v.draft_probs[i];
      }
      rows.push_back(at);
    }
  }
}

std::vector<sampling::VerifyResult> StepExecutor::FoldVerifyPositions(
    std::span<const sampling::VerifyRow> verify_rows,
    std::span<sampling::SampleResult> positions) {
  std::vector<sampling::VerifyResult> verified(verify_rows.size());
  size_t next = 0;
  for (size_t v = 0; v < verify_rows.size(); ++v) {
    const size_t g = verify_rows[v].draft_tokens.size();
    std::span<sampling::SampleResult> mine = positions.subspan(next, g + 1);
    next += g + 1;
    size_t i = 0;
    while (i < g && mine[i].draft_accepted) verified[v].accepted.push_back(std::move(mine[i++]));
    // The correction at the first rejection, or the bonus token.
    verified[v].next = std::move(mine[i]);
  }
  return verified;
}

absl::Status StepExecutor::ForwardSampleOnDevice(const StepPlan& plan,
                                                 std::span<const sampling::SamplingRow> rows,
                                                 std::span<sampling::SampleResult> samples,
                                                 StepTimings& timings) {
  const int64_t vocab = model_->config().vocab_size;
  std::vector<int64_t> logit_rows;
  logit_rows.reserve(rows.size());
  for (const sampling::SamplingRow& r : rows) {
    logit_rows.push_back((r.logits - logits_.data()) / vocab);
  }
  std::vector<int32_t> host;
  auto forward_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(
      runner_->ForwardSample(batch_, logit_rows, rows, samples, logits_.data(), &host));
  timings.forward_ms = MillisSince(forward_start);
  for (const SequenceStep& s : plan.sequences) timings.num_tokens += s.tokens.size();
  if (host.empty()) return absl::OkStatus();
  // The rows the device left to the host: their logits are in logits_.
  // Verification positions take the verifier's decision there.
  std::vector<sampling::SamplingRow> host_rows;
  std::vector<int32_t> host_index;
  for (int32_t i : host) {
    if (rows[i].draft_token >= 0) {
      verifier_.VerifyPosition(rows[i], &samples[i]);
      continue;
    }
    host_rows.push_back(rows[i]);
    host_index.push_back(i);
  }
  std::vector<sampling::SampleResult> host_results(host_rows.size());
  sampler_.SampleBatch(host_rows, host_results, model_->pool());
  for (size_t k = 0; k < host_rows.size(); ++k) {
    samples[host_index[k]] = std::move(host_results[k]);
  }
  return absl::OkStatus();
}

absl::Status StepExecutor::ApplyPlanBookkeeping(const StepPlan& plan) {
  for (SeqId id : plan.finished) sequences_.erase(id);
  for (const NewSequence& s : plan.new_sequences) {
    if (sequences_.contains(s.id)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("new sequence %d is already live on this worker", s.id.value()));
    }
    sequences_[s.id] = SequenceState{s.prompt_tokens, s.output_tokens, s.params, s.seed, s.stream};
  }
  for (const kv::BlockCopy& copy : plan.copies) {
    for (BlockId b : {copy.src, copy.dst}) {
      if (b.value() < 0 || b.value() >= config_.num_blocks) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "block copy names block %d: the cache has %d blocks", b.value(), config_.num_blocks));
      }
    }
  }
  return runner_->CopyBlocks(plan.copies);
}

absl::StatusOr<std::vector<StepExecutor::SequenceState*>> StepExecutor::BuildBatch(
    const StepPlan& plan) {
  batch_.clear();
  logit_row_begin_.clear();
  prompt_rows_.clear();
  int64_t num_rows = 0;
  std::vector<SequenceState*> states;
  states.reserve(plan.sequences.size());
  for (const SequenceStep& s : plan.sequences) {
    auto it = sequences_.find(s.id);
    if (it == sequences_.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d is not live on this worker", s.id.value()));
    }
    RETURN_IF_ERROR(ValidateDraftFields(s, model_->config().vocab_size));
    states.push_back(&it->second);
    model::ForwardSequence f;
    f.tokens = s.tokens;
    f.start_pos = s.start_pos;
    f.block_table = s.block_table;
    // A verifying row needs the logits before its first draft and after
    // each; scoring prompt positions needs the chunk's every row.
    const int32_t prompt_rows = NumPromptRows(s, it->second);
    f.num_logits = std::max(s.sample ? s.num_draft_tokens + 1 : 0,
                            prompt_rows > 0 ? static_cast<int32_t>(s.tokens.size()) : 0);
    logit_row_begin_.push_back(num_rows);
    prompt_rows_.push_back(prompt_rows);
    num_rows += f.num_logits;
    batch_.push_back(f);
  }
  return states;
}

absl::Status StepExecutor::RunForward(const StepPlan& plan, float* logits,
                                      StepTimings& timings) {
  auto forward_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(runner_->Forward(batch_, logits));
  timings.forward_ms = MillisSince(forward_start);
  for (const SequenceStep& s : plan.sequences) timings.num_tokens += s.tokens.size();
  return absl::OkStatus();
}

sampling::SamplingRow StepExecutor::RowOf(const SequenceState& state, const float* logits) const {
  sampling::SamplingRow r;
  r.logits = logits;
  r.params = &state.params;
  r.prompt_tokens = state.prompt_tokens;
  r.output_tokens = state.output_tokens;
  r.seed = state.seed;
  r.stream = state.stream;
  r.eos_token_ids = config_.eos_token_ids;
  return r;
}

void StepExecutor::BuildRows(const StepPlan& plan, std::span<SequenceState* const> states,
                             std::vector<sampling::SamplingRow>& sample_rows,
                             std::vector<sampling::VerifyRow>& verify_rows) {
  const int64_t vocab = model_->config().vocab_size;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequenceStep& s = plan.sequences[i];
    if (!s.sample) continue;
    SequenceState* st = states[i];
    // The sampling rows are the last num_draft_tokens + 1 of the sequence's.
    const int64_t row =
        logit_row_begin_[i] + batch_[i].num_logits - (int64_t{s.num_draft_tokens} + 1);
    if (st->params.beam_candidates > 0) {
      SyncBeamHistory(s, st->prompt_tokens.size(), st->output_tokens);
      // Candidates after the token and after each draft (speculative beam
      // search): row j sees the history up to draft j.
      const size_t g = static_cast<size_t>(s.num_draft_tokens);
      for (size_t j = 0; j <= g; ++j) {
        sampling::SamplingRow r =
            RowOf(*st, logits_.data() + (row + static_cast<int64_t>(j)) * vocab);
        r.output_tokens = std::span<const int32_t>(st->output_tokens)
                              .first(st->output_tokens.size() - g + j);
        sample_rows.push_back(r);
      }
    } else if (s.num_draft_tokens > 0) {
      sampling::VerifyRow v;
      v.target = RowOf(*st, logits_.data() + row * vocab);
      v.draft_tokens =
          std::span<const int32_t>(s.tokens).last(static_cast<size_t>(s.num_draft_tokens));
      v.draft_probs = s.draft_probs;
      verify_rows.push_back(v);
    } else {
      sample_rows.push_back(RowOf(*st, logits_.data() + row * vocab));
    }
  }
}

int32_t StepExecutor::NumPromptRows(const SequenceStep& s, const SequenceState& state) {
  if (state.params.prompt_logprobs < 0) return 0;
  const int64_t end = std::min<int64_t>(s.start_pos + static_cast<int64_t>(s.tokens.size()),
                                        static_cast<int64_t>(state.prompt_tokens.size()) - 1);
  return static_cast<int32_t>(std::max<int64_t>(0, end - s.start_pos));
}

std::vector<PromptLogprobs> StepExecutor::ScorePrompts(const StepPlan& plan,
                                                       std::span<SequenceState* const> states) {
  const int64_t vocab = model_->config().vocab_size;
  std::vector<sampling::ScoreRow> rows;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequenceStep& s = plan.sequences[i];
    // Row j holds the distribution after position start_pos + j, which
    // scores the prompt token at start_pos + j + 1.
    for (int32_t j = 0; j < prompt_rows_[i]; ++j) {
      rows.push_back({logits_.data() + (logit_row_begin_[i] + j) * vocab,
                      states[i]->prompt_tokens[static_cast<size_t>(s.start_pos + j + 1)],
                      states[i]->params.prompt_logprobs});
    }
  }
  std::vector<sampling::SampleResult> scored(rows.size());
  sampler_.ScoreBatch(rows, scored, model_->pool());
  std::vector<PromptLogprobs> out;
  size_t next = 0;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    if (prompt_rows_[i] == 0) continue;
    PromptLogprobs p;
    p.id = plan.sequences[i].id;
    p.first_position = plan.sequences[i].start_pos + 1;
    for (int32_t j = 0; j < prompt_rows_[i]; ++j) p.tokens.push_back(std::move(scored[next++]));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<SequenceResult> StepExecutor::CollectResults(
    const StepPlan& plan, std::span<SequenceState* const> states,
    std::span<sampling::SampleResult> samples, std::span<sampling::VerifyResult> verified) {
  std::vector<SequenceResult> results;
  size_t next_sample = 0;
  size_t next_verify = 0;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequenceStep& s = plan.sequences[i];
    if (!s.sample) continue;
    SequenceResult out;
    out.id = s.id;
    if (states[i]->params.beam_candidates > 0) {
      out.sample = std::move(samples[next_sample++]);
      for (int32_t j = 0; j < s.num_draft_tokens; ++j) {
        out.draft_beam_candidates.push_back(std::move(samples[next_sample++].beam_candidates));
      }
    } else if (s.num_draft_tokens > 0) {
      sampling::VerifyResult& v = verified[next_verify++];
      out.accepted_drafts = std::move(v.accepted);
      out.sample = std::move(v.next);
    } else {
      out.sample = std::move(samples[next_sample++]);
    }
    // Emitted tokens join the history, so the next step's penalties,
    // min_tokens and RNG step count them (a beam's grows from its tokens).
    SequenceState* st = states[i];
    if (st->params.beam_candidates == 0) {
      for (const sampling::SampleResult& a : out.accepted_drafts) {
        st->output_tokens.push_back(a.token);
      }
      st->output_tokens.push_back(out.sample.token);
    }
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace tandem::worker
