// Scheduler's migration methods: a request leaves a scheduler whose worker
// group failed (Evict, TakeEvicted) and continues on another (Resume,
// Adopt), or ends where it is (Finish). What moves is the request's whole
// state, so nothing the client saw is repeated or lost: the generated tokens
// stay in each sequence (recomputed as a longer prompt: preemption's path),
// the detokenizer and stop checker keep their place in the text, and the
// worker's sampler continues at the same RNG position because a sequence's
// stream depends only on (seed, stream index, tokens generated).
#include <utility>

#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace tandem::coordinator {

MigratingRequest::MigratingRequest() = default;
MigratingRequest::MigratingRequest(std::unique_ptr<Scheduler::RequestState> state)
    : state_(std::move(state)) {}
MigratingRequest::~MigratingRequest() = default;
MigratingRequest::MigratingRequest(MigratingRequest&&) noexcept = default;
MigratingRequest& MigratingRequest::operator=(MigratingRequest&&) noexcept = default;

RequestId MigratingRequest::id() const { return state_->request.id; }
std::span<const int32_t> MigratingRequest::prompt_tokens() const {
  return state_->request.prompt_tokens;
}
int32_t MigratingRequest::num_migrations() const { return state_->num_migrations; }
int32_t MigratingRequest::num_strikes() const { return state_->num_strikes; }
const absl::Status& MigratingRequest::cause() const { return state_->eviction_cause; }

int64_t Scheduler::TokensGenerated(const RequestState* r) {
  int64_t tokens = 0;
  for (const auto& c : r->completions) {
    tokens += static_cast<int64_t>(c->completion.token_ids.size());
  }
  // Every beam step lengthens each of the num_beams running beams.
  for (const auto& b : r->beams) tokens += static_cast<int64_t>(b->tokens.size());
  return tokens;
}

std::vector<Scheduler::Sequence*> Scheduler::LiveSequences(RequestState* r) {
  std::vector<Sequence*> out;
  if (r->parent != nullptr && !r->parent->finished()) out.push_back(r->parent.get());
  for (auto& c : r->completions) {
    if (!c->finished()) out.push_back(c.get());
  }
  for (auto& b : r->beams) {
    if (!b->finished()) out.push_back(b.get());
  }
  return out;
}

void Scheduler::Evict(RequestState* r, const absl::Status& cause, bool charged) {
  for (Sequence* seq : LiveSequences(r)) {
    DetachSequence(seq);
    seq->num_computed = 0;
    seq->scheduled = 0;
  }
  if (charged) {
    // Progress since the last strike clears the earlier ones.
    const int64_t tokens = TokensGenerated(r);
    r->num_strikes = tokens > r->tokens_at_strike ? 1 : r->num_strikes + 1;
    r->tokens_at_strike = tokens;
  }
  r->eviction_cause = cause;
  auto it = requests_.find(r->request.id);
  CHECK(it != requests_.end(), "evicting request %d that is not here", r->request.id.value());
  evicted_.emplace_back(std::move(it->second));
  requests_.erase(it);
  num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
  TANDEM_LOG(kInfo, "request %d evicted for migration: %s", r->request.id.value(),
             cause.ToString());
}

std::vector<MigratingRequest> Scheduler::TakeEvicted() { return std::exchange(evicted_, {}); }

void Scheduler::EvictAll(const absl::Status& cause) {
  DrainInbox();
  std::vector<RequestState*> all;
  for (auto& [id, r] : requests_) {
    if (!r->done) all.push_back(r.get());
  }
  for (RequestState* r : all) Evict(r, cause, /*charged=*/false);
  retired_.clear();
  EraseDoneRequests();
}

void Scheduler::Resume(MigratingRequest request) {
  CHECK(request.state_ != nullptr, "Resume of an empty MigratingRequest");
  ++request.state_->num_migrations;
  absl::MutexLock lock(&inbox_mutex_);
  resumed_.push_back(std::move(request));
  num_outstanding_.fetch_add(1, std::memory_order_relaxed);
}

void Scheduler::Adopt(std::unique_ptr<RequestState> state) {
  RequestState* r = state.get();
  if (requests_.contains(r->request.id)) {
    // Ids are unique in the process; a second copy would be a bug upstream.
    TANDEM_LOG(kError, "request %d resumed while it runs here; the copy is dropped",
               r->request.id.value());
    num_outstanding_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  r->arrival = arrival_counter_++;
  for (Sequence* seq : LiveSequences(r)) {
    if (seq->status != SequenceStatus::kWaiting) continue;  // n > 1 children not forked yet
    seq->draft = DraftState();
    seq->draft.active = Speculates(r);
    seq->draft.acceptance = gamma_controller_.NewProfile();
    EnqueueWaiting(seq);
  }
  requests_[r->request.id] = std::move(state);
}

void Scheduler::Finish(MigratingRequest request, FinishReason reason,
                       const absl::Status& status) {
  CHECK(reason == FinishReason::kCancelled || reason == FinishReason::kError,
        "Finish of a migrating request with reason %s", FinishReasonName(reason));
  RequestState* r = request.state_.get();
  const RequestId id = r->request.id;
  num_outstanding_.fetch_add(1, std::memory_order_relaxed);
  requests_[id] = std::move(request.state_);
  if (reason == FinishReason::kCancelled) {
    CancelRequest(r);
  } else {
    FailRequest(r, status);
  }
  retired_.clear();
  EraseDoneRequests();
}

}  // namespace tandem::coordinator
