#include "coordinator/scheduler.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "coordinator/scheduler_state.h"
#include "draft/speculative_spec.h"
#include "engine/sampling/stop_checker.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

absl::Status ValidateSchedulerConfig(const SchedulerConfig& config) {
  if (config.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_num_batched_tokens %d is out of range: must be >= 1", config.max_num_batched_tokens));
  }
  if (config.max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_num_seqs %d is out of range: must be >= 1", config.max_num_seqs));
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, WorkerGroup* group,
                     const tokenizer::Tokenizer* tokenizer, RequestObserver* observer)
    : config_(config),
      group_(group),
      tokenizer_(tokenizer),
      observer_(observer),
      kv_(std::in_place, kv::KvManagerConfig{group->info().num_blocks, group->info().block_size,
                                             config.enable_prefix_cache}),
      eos_ids_(tokenizer->EndOfGenerationIds()) {
  absl::Status status = ValidateSchedulerConfig(config);
  CHECK(status.ok(), "%s", status.ToString());
}

Scheduler::~Scheduler() = default;

absl::Status Scheduler::Submit(GenerateRequest request) {
  const WorkerGroupInfo& info = group_->info();
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  if (prompt_len == 0) {
    return absl::InvalidArgumentError("prompt is empty: at least 1 token is required");
  }
  for (int32_t t : request.prompt_tokens) {
    if (t < 0 || t >= info.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prompt token id %d is out of range: the vocabulary has %d tokens", t, info.vocab_size));
    }
  }
  if (prompt_len >= info.context_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt has %d tokens: the context length is %d (and at least 1 token is generated)",
        prompt_len, info.context_length));
  }
  absl::Status params_status = sampling::ValidateSamplingParams(request.params, info.vocab_size);
  if (!params_status.ok()) return params_status;
  if (request.params.beam_candidates != 0 || request.params.beam_sample) {
    return absl::InvalidArgumentError(
        "beam_candidates / beam_sample are set by the scheduler, not by requests");
  }
  if (!request.draft.empty()) {
    if (absl::Status s = draft::ValidateRequestedDraft(request.draft); !s.ok()) return s;
    if (draft_pool_ == nullptr || !draft_pool_->Serves(request.draft)) {
      const bool deployed = draft_pool_ != nullptr && draft_pool_->Serves("");
      return absl::InvalidArgumentError(absl::StrFormat(
          "draft '%s': no draft of that kind runs here (%s; any request may name ngram)",
          request.draft,
          deployed ? absl::StrCat("the deployment's draft is ", draft_pool_->name())
                   : std::string("the deployment has no draft")));
    }
  }
  if (request.beam.has_value()) {
    if (absl::Status s = ValidateBeamSearchParams(*request.beam); !s.ok()) return s;
    if (request.params.n != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "n %d with num_beams %d: beam search returns num_return_sequences sequences; n must "
          "be 1",
          request.params.n, request.beam->num_beams));
    }
    if (!request.params.stop.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d stop strings with num_beams %d: beam search stops on EOS and stop token ids only",
          request.params.stop.size(), request.beam->num_beams));
    }
    // The worker returns max(2, 1 + #EOS ids) x group size candidates per
    // beam (plus num_beams with groups).
    const int64_t num_eos = static_cast<int64_t>(eos_ids_.size() + request.params.stop_token_ids.size());
    const int64_t group_size = request.beam->num_beams / request.beam->num_beam_groups;
    const int64_t per_beam = std::max<int64_t>(2, 1 + num_eos) * group_size +
                             (request.beam->num_beam_groups > 1 ? request.beam->num_beams : 0);
    if (per_beam > sampling::kMaxBeamCandidates) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "num_beams %d with %d EOS / stop token ids needs %d candidates per beam: the limit is %d",
          request.beam->num_beams, num_eos, per_beam, sampling::kMaxBeamCandidates));
    }
  }
  const int64_t blocks_needed = (prompt_len + 1 + info.block_size - 1) / info.block_size;
  if (blocks_needed > info.num_blocks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "prompt of %d tokens needs %d KV blocks: the cache holds %d blocks of %d tokens",
        prompt_len, blocks_needed, info.num_blocks, info.block_size));
  }
  absl::MutexLock lock(&inbox_mutex_);
  inbox_.push_back(std::move(request));
  num_outstanding_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Scheduler::ResetKvCache() {
  CHECK(running_.empty(), "ResetKvCache with %d sequences still in the KV cache",
        running_.size());
  released_.clear();
  pending_new_.clear();
  kv_.emplace(kv::KvManagerConfig{group_->info().num_blocks, group_->info().block_size,
                                  config_.enable_prefix_cache});
}

void Scheduler::Cancel(RequestId id) {
  absl::MutexLock lock(&inbox_mutex_);
  cancels_.push_back(id);
}

bool Scheduler::HasWork() const {
  {
    absl::MutexLock lock(&inbox_mutex_);
    if (!inbox_.empty() || !cancels_.empty()) return true;
  }
  return !requests_.empty();
}

void Scheduler::DrainInbox() {
  std::vector<GenerateRequest> inbox;
  std::vector<RequestId> cancels;
  {
    absl::MutexLock lock(&inbox_mutex_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (GenerateRequest& r : inbox) {
    auto state = std::make_unique<RequestState>();
    state->request = std::move(r);
    state->arrival = arrival_counter_++;
    state->submit_time = Clock::now();
    state->seed = state->request.params.seed.has_value() ? *state->request.params.seed
                                                         : std::random_device()();
    state->draft_params = state->request.params;
    state->draft_params.temperature = 0.0f;
    state->draft_params.logprobs = 0;
    state->draft_params.n = 1;
    RequestState* raw = state.get();
    if (requests_.contains(raw->request.id)) {
      TANDEM_LOG(kWarning, "request %d submitted twice; the second is dropped",
                 raw->request.id.value());
      num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    requests_[raw->request.id] = std::move(state);
    Admit(raw);
  }
  for (RequestId id : cancels) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second->done) continue;
    RequestState* r = it->second.get();
    if (r->beam) {
      FinishBeamSearch(r, FinishReason::kCancelled);
      continue;
    }
    if (r->parent && !r->parent->finished) ReleaseSequence(r->parent.get());
    for (auto& c : r->completions) {
      if (!c->finished) FinishSequence(c.get(), FinishReason::kCancelled);
    }
  }
}

// Creates the request's sequences and queues the first one.
void Scheduler::Admit(RequestState* r) {
  if (r->request.beam.has_value()) {
    AdmitBeamSearch(r);
    return;
  }
  const int32_t n = r->request.params.n;
  auto make = [&](int32_t index) {
    auto s = std::make_unique<Sequence>();
    s->request = r;
    s->index = index;
    s->tokens = r->request.prompt_tokens;
    s->prompt_len = static_cast<int32_t>(s->tokens.size());
    s->detokenizer = std::make_unique<tokenizer::IncrementalDetokenizer>(*tokenizer_, /*skip_special=*/true);
    s->stop_checker = std::make_unique<sampling::StopChecker>(r->request.params.stop);
    s->speculate = draft_pool_ != nullptr && r->request.num_speculative_tokens.value_or(1) != 0 &&
                 draft_pool_->Serves(r->request.draft);
    s->acceptance = gamma_controller_.NewProfile();
    return s;
  };
  for (int32_t i = 0; i < n; ++i) r->completions.push_back(make(i));
  r->num_unfinished = n;
  Sequence* first;
  if (n > 1) {
    r->parent = make(-1);
    r->parent->fork_parent = true;
    first = r->parent.get();
  } else {
    first = r->completions[0].get();
  }
  first->in_waiting = true;
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), first,
                              [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
  waiting_.insert(pos, first);
}

absl::StatusOr<bool> Scheduler::Step() {
  const absl::Time step_start = absl::Now();
  DrainInbox();
  worker::StepPlan plan;
  plan.step_id = next_step_id_++;
  plan.finished = std::move(released_);
  released_.clear();
  plan.new_sequences = std::move(pending_new_);
  pending_new_.clear();
  std::vector<Sequence*> scheduled;
  int32_t budget = config_.max_num_batched_tokens;

  std::stable_sort(running_.begin(), running_.end(),
                   [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
  propose_ms_ = 0;
  ProposeDrafts();
  // Running sequences first (decode tokens and unfinished prefills), so work
  // already admitted keeps going; preempt from the back when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (static_cast<int32_t>(scheduled.size()) >= config_.max_num_seqs) break;
    int32_t num_new = std::min(seq->target() - seq->num_computed, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
    // A decoding sequence's drafts ride along with its token (verified by
    // the worker), as far as the budget allows.
    std::vector<int32_t> tokens(seq->tokens.begin() + seq->num_computed,
                                seq->tokens.begin() + seq->num_computed + num_new);
    int32_t num_drafts = 0;
    if (num_new == 1 && !seq->drafts.empty()) {
      num_drafts = std::min(static_cast<int32_t>(seq->drafts.size()), budget - 1);
      tokens.insert(tokens.end(), seq->drafts.begin(), seq->drafts.begin() + num_drafts);
    }
    std::optional<std::vector<kv::BlockCopy>> copies = kv_->AppendTokens(seq->id, tokens);
    if (!copies.has_value() && num_drafts > 0) {
      // No blocks for the drafts: decode plainly this step.
      num_drafts = 0;
      tokens.resize(1);
      copies = kv_->AppendTokens(seq->id, tokens);
    }
    if (copies.has_value()) {
      plan.copies.insert(plan.copies.end(), copies->begin(), copies->end());
      seq->scheduled = num_new;
      seq->num_step_drafts = num_drafts;
      budget -= num_new + num_drafts;
      scheduled.push_back(seq);
      ++i;
      continue;
    }
    Sequence* victim = running_.back();
    if (victim != seq) {
      Preempt(victim);
      plan.finished.push_back(victim->id);
      continue;  // retry seq with the freed blocks
    }
    if (scheduled.empty()) {
      // Alone in the cache and still out of blocks: it can never grow.
      TANDEM_LOG(kWarning, "request %d: KV cache full at %d tokens; finishing with length",
                 seq->request->request.id.value(), seq->tokens.size());
      FinishSequence(seq, FinishReason::kLength);
      continue;
    }
    Preempt(seq);
    plan.finished.push_back(seq->id);
    break;
  }

  // Then admit waiting sequences in order while budget and blocks allow.
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(scheduled.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    seq->id = NextSeqId();
    int32_t cached = kv_->AddSequence(seq->id, seq->tokens);
    int32_t num_new = std::min(seq->target() - cached, budget);
    if (num_new > 0 && kv_->NumBlocksNeeded(seq->id, num_new) > kv_->num_free_blocks()) {
      kv_->Free(seq->id);
      break;
    }
    waiting_.pop_front();
    seq->in_waiting = false;
    seq->in_kv = true;
    seq->num_computed = cached;
    RequestState* r = seq->request;
    if (!r->admitted_once) {
      r->admitted_once = true;
      r->admit_time = Clock::now();
      r->prefix_hit_tokens = cached;
    }
    running_.push_back(seq);
    if (num_new <= 0) {  // a fork parent whose prompt is all cached
      ForkChildren(seq);
      continue;
    }
    worker::NewSequence ns;
    ns.id = seq->id;
    ns.prompt_tokens.assign(seq->tokens.begin(), seq->tokens.begin() + seq->prompt_len);
    ns.output_tokens.assign(seq->tokens.begin() + seq->prompt_len, seq->tokens.end());
    ns.params = r->request.params;
    ns.seed = r->seed;
    ns.stream = static_cast<uint64_t>(std::max(0, seq->index));
    plan.new_sequences.push_back(std::move(ns));
    std::span<const int32_t> tokens(seq->tokens.data() + cached, num_new);
    std::optional<std::vector<kv::BlockCopy>> copies = kv_->AppendTokens(seq->id, tokens);
    CHECK(copies.has_value(), "blocks were checked free for sequence %d", seq->id.value());
    plan.copies.insert(plan.copies.end(), copies->begin(), copies->end());
    seq->scheduled = num_new;
    budget -= num_new;
    scheduled.push_back(seq);
  }

  DropUnusedDrafts();
  for (Sequence* seq : scheduled) {
    worker::SequenceStep s;
    s.id = seq->id;
    s.tokens.assign(seq->tokens.begin() + seq->num_computed,
                    seq->tokens.begin() + seq->num_computed + seq->scheduled);
    s.start_pos = seq->num_computed;
    if (seq->num_step_drafts > 0) {
      s.tokens.insert(s.tokens.end(), seq->drafts.begin(),
                      seq->drafts.begin() + seq->num_step_drafts);
      s.num_draft_tokens = seq->num_step_drafts;
      s.draft_probs.assign(seq->draft_probs.begin(),
                           seq->draft_probs.begin() + seq->num_step_drafts);
    }
    std::span<const BlockId> table = kv_->BlockTable(seq->id);
    s.block_table.assign(table.begin(), table.end());
    s.sample = !seq->fork_parent && seq->num_computed + seq->scheduled == seq->target();
    plan.sequences.push_back(std::move(s));
  }

  if (plan.sequences.empty() && plan.finished.empty() && plan.new_sequences.empty()) {
    // Nothing ran; requests finished by cancellation may still need reporting.
    EraseDoneRequests();
    return false;
  }

  absl::StatusOr<worker::StepResult> result = group_->Step(plan);
  ++stats_.num_steps;
  if (!result.ok()) {
    const absl::Status error(result.status().code(),
                             absl::StrFormat("worker step %d failed: %s", plan.step_id,
                                             result.status().message()));
    std::vector<RequestState*> affected;
    for (Sequence* seq : scheduled) affected.push_back(seq->request);
    for (RequestState* r : affected) {
      if (!r->done) FailRequest(r, error);
    }
    EraseDoneRequests();
    return result.status();
  }
  stats_.forward_ms += result->timings.forward_ms;
  stats_.worker_step_ms += result->timings.total_ms;
  const int64_t step_tokens = result->timings.num_tokens;

  absl::flat_hash_map<SeqId, Sequence*> by_id;
  for (Sequence* seq : scheduled) {
    seq->num_computed += seq->scheduled;
    if (seq->num_computed <= seq->prompt_len) stats_.num_prompt_tokens_computed += seq->scheduled;
    seq->scheduled = 0;
    by_id[seq->id] = seq;
  }
  for (const worker::SequenceResult& res : result->results) {
    auto it = by_id.find(res.id);
    CHECK(it != by_id.end(), "worker returned a result for unscheduled sequence %d",
          res.id.value());
    Sequence* seq = it->second;
    if (seq->finished) continue;
    if (seq->beam && seq->num_step_drafts > 0) {
      // Speculative beam search: the candidates after the token now, those
      // after each draft for the beam steps that follow the draft.
      const int32_t g = seq->num_step_drafts;
      seq->draft_base = static_cast<int32_t>(seq->tokens.size());
      seq->proposed.assign(seq->drafts.begin(), seq->drafts.begin() + g);
      seq->spec_drafts = seq->proposed;
      seq->draft_candidates.clear();
      for (const auto& row : res.draft_beam_candidates) {
        std::vector<BeamCandidate>& out = seq->draft_candidates.emplace_back();
        for (const sampling::BeamToken& t : row) out.push_back({t.token, t.score, t.key});
      }
      if (static_cast<int32_t>(seq->draft_candidates.size()) != g) {
        seq->spec_drafts.clear();  // a worker without rows: no shortcut
        seq->draft_candidates.clear();
        kv_->Truncate(seq->id, seq->num_computed);
      }
      ++stats_.num_speculative_rounds;
      stats_.num_draft_tokens += g;
      ++seq->request->num_speculative_rounds;
      seq->request->num_draft_tokens += g;
      seq->drafts.clear();
      seq->draft_probs.clear();
      seq->num_step_drafts = 0;
      OnSampled(seq, res.sample);
    } else if (seq->num_step_drafts > 0) {
      FoldVerification(seq, res);
    } else {
      OnSampled(seq, res.sample);
    }
  }
  for (Sequence* seq : scheduled) {
    if (seq->fork_parent && !seq->finished && seq->in_kv && seq->num_computed == seq->target()) {
      ForkChildren(seq);
    }
  }
  // Beam requests whose every beam has its candidates take their step.
  std::vector<RequestState*> beam_requests;
  for (Sequence* seq : scheduled) {
    RequestState* r = seq->request;
    if (seq->beam && !r->done && std::find(beam_requests.begin(), beam_requests.end(), r) ==
                                      beam_requests.end()) {
      beam_requests.push_back(r);
    }
  }
  for (RequestState* r : beam_requests) AdvanceBeams(r);
  retired_.clear();
  EraseDoneRequests();
  ++stats_.num_steps_ok;
  const double step_ms = absl::ToDoubleMilliseconds(absl::Now() - step_start);
  stats_.step_ms += step_ms;
  // What a step of this size costs the batch: the whole step (scheduling,
  // the worker's forward and verification, the RPC, folding results), less
  // the draft's proposal, which the controller counts apart.
  gamma_controller_.ObserveStep(step_tokens, std::max(0.0, step_ms - propose_ms_));
  return true;
}

void Scheduler::EraseDoneRequests() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second->done) {
      requests_.erase(it++);
    } else {
      ++it;
    }
  }
}

void Scheduler::Preempt(Sequence* seq) {
  ForgetDraft(seq);  // it returns under a new sequence id
  kv_->Free(seq->id);
  seq->in_kv = false;
  seq->num_computed = 0;
  std::erase(running_, seq);
  seq->in_waiting = true;
  waiting_.push_front(seq);
  ++stats_.num_preemptions;
}

void Scheduler::ForkInKv(Sequence* parent, Sequence* child) {
  RequestState* r = parent->request;
  child->id = NextSeqId();
  kv_->Fork(parent->id, child->id);
  child->in_kv = true;
  child->num_computed = parent->num_computed;
  running_.push_back(child);
  worker::NewSequence ns;
  ns.id = child->id;
  ns.prompt_tokens.assign(child->tokens.begin(), child->tokens.begin() + child->prompt_len);
  ns.output_tokens.assign(child->tokens.begin() + child->prompt_len, child->tokens.end());
  ns.params = r->request.params;
  ns.seed = r->seed;
  ns.stream = static_cast<uint64_t>(std::max(0, child->index));
  pending_new_.push_back(std::move(ns));
}

void Scheduler::ForkChildren(Sequence* parent) {
  for (auto& child : parent->request->completions) {
    if (child->finished) continue;  // cancelled meanwhile
    ForkInKv(parent, child.get());
  }
  ReleaseSequence(parent);
}

void Scheduler::OnSampled(Sequence* seq, const sampling::SampleResult& sample) {
  RequestState* r = seq->request;
  if (seq->beam) {
    if (!r->first_token_time) r->first_token_time = Clock::now();
    seq->candidates.clear();
    for (const sampling::BeamToken& t : sample.beam_candidates) {
      seq->candidates.push_back({t.token, t.score, t.key});
    }
    seq->has_candidates = true;
    return;
  }
  const sampling::SamplingParams& params = r->request.params;
  if (!r->first_token_time) r->first_token_time = Clock::now();
  const int32_t token = sample.token;
  seq->tokens.push_back(token);
  Completion& c = seq->completion;
  c.token_ids.push_back(token);
  PositionLogprobs lp;
  lp.token = token;
  lp.logprob = sample.logprob;
  lp.top = sample.top_logprobs;
  CompletionDelta delta;
  delta.id = r->request.id;
  delta.index = seq->index;
  delta.token_ids.push_back(token);
  if (params.logprobs > 0) delta.logprobs.push_back(lp);
  c.logprobs.push_back(std::move(lp));
  ++stats_.num_generated_tokens;

  FinishReason reason = FinishReason::kNone;
  const bool is_stop_token = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                       token) != params.stop_token_ids.end();
  const bool is_eos =
      !params.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
  if (is_stop_token || is_eos) {
    reason = FinishReason::kStop;
  } else {
    sampling::StopChecker::Update update = seq->stop_checker->Append(seq->detokenizer->Append(token));
    delta.text = std::move(update.emit);
    if (update.stopped) reason = FinishReason::kStop;
  }
  if (reason == FinishReason::kNone &&
      (static_cast<int32_t>(c.token_ids.size()) >= params.max_tokens ||
       static_cast<int64_t>(seq->tokens.size()) >= group_->info().context_length)) {
    reason = FinishReason::kLength;
  }
  if (reason != FinishReason::kNone && !seq->stop_checker->stopped()) {
    // Release text held back for a possible stop string or a partial UTF-8 sequence.
    delta.text += seq->stop_checker->Append(seq->detokenizer->Flush()).emit;
    delta.text += seq->stop_checker->Flush();
  }
  c.text += delta.text;
  delta.finish_reason = reason;
  observer_->OnDelta(delta);
  if (reason != FinishReason::kNone) FinishSequence(seq, reason);
}

void Scheduler::ReleaseSequence(Sequence* seq) {
  ForgetDraft(seq);
  if (seq->in_kv) {
    kv_->Free(seq->id);
    released_.push_back(seq->id);
    seq->in_kv = false;
  }
  if (seq->in_waiting) {
    std::erase(waiting_, seq);
    seq->in_waiting = false;
  }
  std::erase(running_, seq);
  seq->finished = true;
}

void Scheduler::FinishSequence(Sequence* seq, FinishReason reason) {
  ReleaseSequence(seq);
  seq->completion.finish_reason = reason;
  RequestState* r = seq->request;
  --r->num_unfinished;
  MaybeCompleteRequest(r);
}

void Scheduler::FailRequest(RequestState* r, const absl::Status& status) {
  r->status = status;
  if (r->beam) {
    if (!r->done) FinishBeamSearch(r, FinishReason::kError);
    return;
  }
  if (r->parent && !r->parent->finished) ReleaseSequence(r->parent.get());
  for (auto& c : r->completions) {
    if (!c->finished) FinishSequence(c.get(), FinishReason::kError);
  }
}

void Scheduler::MaybeCompleteRequest(RequestState* r) {
  if (r->num_unfinished > 0 || r->done) return;
  if (r->parent && !r->parent->finished) ReleaseSequence(r->parent.get());
  r->done = true;
  num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
  RequestOutput out;
  out.id = r->request.id;
  out.prompt_token_ids = r->request.prompt_tokens;
  out.prefix_hit_tokens = r->prefix_hit_tokens;
  out.status = r->status;
  auto now = Clock::now();
  out.latency_ms = std::chrono::duration<double, std::milli>(now - r->submit_time).count();
  out.num_speculative_rounds = r->num_speculative_rounds;
  out.num_draft_tokens = r->num_draft_tokens;
  out.num_accepted_tokens = r->num_accepted_tokens;
  if (r->admit_time) {
    out.queue_ms = std::chrono::duration<double, std::milli>(*r->admit_time - r->submit_time).count();
  }
  if (r->first_token_time) {
    out.time_to_first_token_ms =
        std::chrono::duration<double, std::milli>(*r->first_token_time - r->submit_time).count();
  }
  for (auto& c : r->completions) out.completions.push_back(std::move(c->completion));
  if (r->beam) out.completions = std::move(r->beam_results);
  observer_->OnFinished(out);
}

}  // namespace tandem::coordinator
