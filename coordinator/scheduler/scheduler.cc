#include "coordinator/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "coordinator/scheduler/request_validation.h"
#include "coordinator/scheduler/scheduler_state.h"
#include "engine/sampling/stop_checker.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {

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
  const RequestLimits limits{info.vocab_size, info.context_length, info.num_blocks,
                             info.block_size, static_cast<int32_t>(eos_ids_.size())};
  if (absl::Status s = ValidateGenerateRequest(request, limits); !s.ok()) return s;
  if (!request.draft.empty() && (draft_pool_ == nullptr || !draft_pool_->Serves(request.draft))) {
    const bool deployed = draft_pool_ != nullptr && draft_pool_->Serves("");
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft '%s': no draft of that kind runs here (%s; any request may name ngram)",
        request.draft,
        deployed ? absl::StrCat("the deployment's draft is ", draft_pool_->name())
                 : std::string("the deployment has no draft")));
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
    if (!inbox_.empty() || !cancels_.empty() || !resumed_.empty()) return true;
  }
  return !requests_.empty();
}

absl::StatusOr<bool> Scheduler::Step() {
  const absl::Time step_start = absl::Now();
  DrainInbox();
  ScheduledStep step = Schedule();
  if (step.empty()) {
    // Nothing ran; requests finished by cancellation may still need reporting.
    EraseDoneRequests();
    return false;
  }
  absl::StatusOr<worker::StepResult> result = group_->Step(step.plan);
  ++stats_.num_steps;
  if (!result.ok()) {
    FailStep(step, result.status());
    return result.status();
  }
  Apply(step, *result);
  ++stats_.num_steps_ok;
  const double step_ms = absl::ToDoubleMilliseconds(absl::Now() - step_start);
  stats_.step_ms += step_ms;
  stats_.forward_ms += result->timings.forward_ms;
  stats_.worker_step_ms += result->timings.total_ms;
  // What a step of this size costs the batch: the whole step (scheduling,
  // the worker's forward and verification, the RPC, folding results), less
  // the draft's proposal, which the controller counts apart.
  gamma_controller_.ObserveStep(result->timings.num_tokens, std::max(0.0, step_ms - propose_ms_));
  return true;
}

void Scheduler::DrainInbox() {
  std::vector<GenerateRequest> inbox;
  std::vector<RequestId> cancels;
  std::vector<MigratingRequest> resumed;
  {
    absl::MutexLock lock(&inbox_mutex_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
    resumed.swap(resumed_);
  }
  // Resumed requests first: a cancel queued after a Resume finds its request.
  for (MigratingRequest& m : resumed) Adopt(std::move(m.state_));
  for (GenerateRequest& r : inbox) {
    if (requests_.contains(r.id)) {
      TANDEM_LOG(kWarning, "request %d submitted twice; the second is dropped", r.id.value());
      num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    auto state = std::make_unique<RequestState>();
    state->request = std::move(r);
    state->arrival = arrival_counter_++;
    state->submit_time = Clock::now();
    state->seed = state->request.params.seed.has_value() ? *state->request.params.seed
                                                         : std::random_device()();
    state->draft_params = state->request.params;
    state->draft_params.temperature = 0.0f;
    state->draft_params.logprobs = 0;
    state->draft_params.prompt_logprobs = -1;
    state->draft_params.n = 1;
    RequestState* raw = state.get();
    requests_[raw->request.id] = std::move(state);
    Admit(raw);
  }
  for (RequestId id : cancels) {
    auto it = requests_.find(id);
    if (it != requests_.end() && !it->second->done) CancelRequest(it->second.get());
  }
}

void Scheduler::CancelRequest(RequestState* r) {
  if (r->beam) {
    FinishBeamSearch(r, FinishReason::kCancelled);
    return;
  }
  if (r->parent && !r->parent->finished()) ReleaseSequence(r->parent.get());
  for (auto& c : r->completions) {
    if (!c->finished()) FinishSequence(c.get(), FinishReason::kCancelled);
  }
}

bool Scheduler::Speculates(const RequestState* r) const {
  return draft_pool_ != nullptr && r->request.num_speculative_tokens.value_or(1) != 0 &&
         draft_pool_->Serves(r->request.draft);
}

std::unique_ptr<Scheduler::Sequence> Scheduler::MakeSequence(RequestState* r, int32_t index,
                                                             std::vector<int32_t> tokens) {
  auto s = std::make_unique<Sequence>();
  s->request = r;
  s->index = index;
  s->tokens = std::move(tokens);
  s->prompt_len = static_cast<int32_t>(r->request.prompt_tokens.size());
  s->draft.active = Speculates(r);
  s->draft.acceptance = gamma_controller_.NewProfile();
  return s;
}

// Creates the request's sequences and queues the first one.
void Scheduler::Admit(RequestState* r) {
  if (r->request.beam.has_value()) {
    AdmitBeamSearch(r);
    return;
  }
  const int32_t n = r->request.params.n;
  for (int32_t i = 0; i < n; ++i) {
    std::unique_ptr<Sequence> s = MakeSequence(r, i, r->request.prompt_tokens);
    s->detokenizer =
        std::make_unique<tokenizer::IncrementalDetokenizer>(*tokenizer_, /*skip_special=*/true);
    s->stop_checker = std::make_unique<sampling::StopChecker>(r->request.params.stop);
    r->completions.push_back(std::move(s));
  }
  r->num_unfinished = n;
  if (n > 1) {
    r->parent = MakeSequence(r, -1, r->request.prompt_tokens);
    r->parent->role = SequenceRole::kForkParent;
    EnqueueWaiting(r->parent.get());
  } else {
    EnqueueWaiting(r->completions[0].get());
  }
}

void Scheduler::EnqueueWaiting(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                              [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
  waiting_.insert(pos, seq);
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

void Scheduler::DetachSequence(Sequence* seq) {
  ForgetDraft(seq);
  if (seq->running()) {
    kv_->Free(seq->id);
    // A fork not yet announced is never announced; else the worker forgets it.
    auto pending = std::find_if(pending_new_.begin(), pending_new_.end(),
                                [&](const worker::NewSequence& ns) { return ns.id == seq->id; });
    if (pending != pending_new_.end()) {
      pending_new_.erase(pending);
    } else {
      released_.push_back(seq->id);
    }
    std::erase(running_, seq);
    seq->status = SequenceStatus::kWaiting;
  } else if (seq->status == SequenceStatus::kWaiting) {
    std::erase(waiting_, seq);
  }
}

void Scheduler::ReleaseSequence(Sequence* seq) {
  DetachSequence(seq);
  seq->status = SequenceStatus::kFinished;
}

void Scheduler::FinishSequence(Sequence* seq, FinishReason reason) {
  ReleaseSequence(seq);
  seq->completion.finish_reason = reason;
  RequestState* r = seq->request;
  --r->num_unfinished;
  MaybeCompleteRequest(r);
}

void Scheduler::FailStep(const ScheduledStep& step, const absl::Status& status) {
  const absl::Status error(status.code(), absl::StrFormat("worker step %d failed: %s",
                                                          step.plan.step_id, status.message()));
  std::vector<RequestState*> failed;
  for (Sequence* seq : step.sequences) {
    RequestState* r = seq->request;
    if (!r->done && std::find(failed.begin(), failed.end(), r) == failed.end()) {
      failed.push_back(r);
    }
  }
  for (RequestState* r : failed) {
    if (evict_on_failure_) {
      Evict(r, error, /*charged=*/true);
    } else {
      FailRequest(r, error);
    }
  }
  retired_.clear();
  EraseDoneRequests();
}

void Scheduler::FailRequest(RequestState* r, const absl::Status& status) {
  r->status = status;
  if (r->beam) {
    FinishBeamSearch(r, FinishReason::kError);
    return;
  }
  if (r->parent && !r->parent->finished()) ReleaseSequence(r->parent.get());
  for (auto& c : r->completions) {
    if (!c->finished()) FinishSequence(c.get(), FinishReason::kError);
  }
}

void Scheduler::MaybeCompleteRequest(RequestState* r) {
  if (r->num_unfinished > 0 || r->done) return;
  if (r->parent && !r->parent->finished()) ReleaseSequence(r->parent.get());
  r->done = true;
  num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
  auto ms_since_submit = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - r->submit_time).count();
  };
  RequestOutput out;
  out.id = r->request.id;
  out.prompt_token_ids = r->request.prompt_tokens;
  out.prompt_logprobs = r->prompt_logprobs;
  out.prefix_hit_tokens = r->prefix_hit_tokens;
  out.num_migrations = r->num_migrations;
  out.status = r->status;
  out.latency_ms = ms_since_submit(Clock::now());
  out.num_speculative_rounds = r->speculation.rounds;
  out.num_draft_tokens = r->speculation.draft_tokens;
  out.num_accepted_tokens = r->speculation.accepted_tokens;
  out.num_accepted_per_position = r->accepted_per_position;
  if (r->admit_time) out.queue_ms = ms_since_submit(*r->admit_time);
  if (r->first_token_time) out.time_to_first_token_ms = ms_since_submit(*r->first_token_time);
  for (auto& c : r->completions) out.completions.push_back(std::move(c->completion));
  if (r->beam) out.completions = std::move(r->beam_results);
  observer_->OnFinished(out);
}

int64_t Scheduler::NumRequestsRunning() const {
  absl::flat_hash_set<const RequestState*> running;
  for (const Sequence* seq : running_) running.insert(seq->request);
  return static_cast<int64_t>(running.size());
}

int64_t Scheduler::NumRequestsWaiting() const {
  int64_t queued;
  {
    absl::MutexLock lock(&inbox_mutex_);
    queued = static_cast<int64_t>(inbox_.size() + resumed_.size());
  }
  return queued + static_cast<int64_t>(requests_.size()) - NumRequestsRunning();
}

}  // namespace tandem::coordinator
