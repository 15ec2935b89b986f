// Scheduler::Schedule: builds one step within the token budget and the free
// KV blocks — running sequences first (decode tokens with their drafts,
// unfinished prefills), preempting the lowest-priority, latest sequence when
// blocks run out; then waiting sequences in priority-then-arrival order
// (chunked prefill). Forks n > 1 children once their parent's prompt is in
// the cache.
#include <algorithm>

#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace tandem::coordinator {

Scheduler::ScheduledStep Scheduler::Schedule() {
  ScheduledStep step;
  step.plan.step_id = next_step_id_++;
  step.plan.finished = std::move(released_);
  released_.clear();
  step.plan.new_sequences = std::move(pending_new_);
  pending_new_.clear();
  int32_t budget = config_.max_num_batched_tokens;
  std::stable_sort(running_.begin(), running_.end(),
                   [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
  propose_ms_ = 0;
  ProposeDrafts();
  ScheduleRunning(step, budget);
  ScheduleWaiting(step, budget);
  DropUnusedDrafts();
  for (Sequence* seq : step.sequences) step.plan.sequences.push_back(SequenceStepOf(seq));
  stats_.num_block_copies += static_cast<int64_t>(step.plan.copies.size());
  return step;
}

void Scheduler::ScheduleRunning(ScheduledStep& step, int32_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    if (static_cast<int32_t>(step.sequences.size()) >= config_.max_num_seqs) return;
    Sequence* seq = running_[i];
    if (seq->target() - seq->num_computed <= 0 || TryScheduleRunning(step, seq, budget)) {
      ++i;
      continue;
    }
    Sequence* victim = running_.back();
    if (victim != seq) {
      Preempt(victim);
      step.plan.finished.push_back(victim->id);
      continue;  // retry seq with the freed blocks
    }
    if (step.sequences.empty()) {
      // Alone in the cache and still out of blocks: it can never grow.
      TANDEM_LOG(kWarning, "request %d: KV cache full at %d tokens; finishing with length",
                 seq->request->request.id.value(), seq->tokens.size());
      FinishSequence(seq, FinishReason::kLength);
      continue;
    }
    Preempt(seq);
    step.plan.finished.push_back(seq->id);
    return;
  }
}

int32_t Scheduler::ChunkTokens(const Sequence* seq, int32_t computed, int32_t budget) {
  int32_t n = std::min(seq->target() - computed, budget);
  if (seq->request->request.params.prompt_logprobs >= 0 && computed < seq->prompt_len) {
    n = std::min(n, kMaxPromptLogprobChunk);
  }
  return n;
}

bool Scheduler::TryScheduleRunning(ScheduledStep& step, Sequence* seq, int32_t& budget) {
  const int32_t num_new = ChunkTokens(seq, seq->num_computed, budget);
  // A decoding sequence's drafts ride along with its token (verified by the
  // worker), as far as the budget allows.
  std::vector<int32_t> tokens(seq->tokens.begin() + seq->num_computed,
                              seq->tokens.begin() + seq->num_computed + num_new);
  int32_t num_drafts = 0;
  const std::vector<int32_t>& drafts = seq->draft.proposal.tokens;
  if (num_new == 1 && !drafts.empty()) {
    num_drafts = std::min(static_cast<int32_t>(drafts.size()), budget - 1);
    tokens.insert(tokens.end(), drafts.begin(), drafts.begin() + num_drafts);
  }
  std::optional<std::vector<kv::BlockCopy>> copies = kv_->AppendTokens(seq->id, tokens);
  if (!copies.has_value() && num_drafts > 0) {
    // No blocks for the drafts: decode plainly this step.
    num_drafts = 0;
    tokens.resize(1);
    copies = kv_->AppendTokens(seq->id, tokens);
  }
  if (!copies.has_value()) return false;
  step.plan.copies.insert(step.plan.copies.end(), copies->begin(), copies->end());
  seq->scheduled = num_new;
  seq->draft.proposal.num_in_step = num_drafts;
  budget -= num_new + num_drafts;
  step.sequences.push_back(seq);
  return true;
}

void Scheduler::ScheduleWaiting(ScheduledStep& step, int32_t& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(step.sequences.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    seq->id = NextSeqId();
    // A request that scores its prompt computes every position.
    const bool scores_prompt = seq->request->request.params.prompt_logprobs >= 0;
    const int32_t cached = kv_->AddSequence(seq->id, seq->tokens, !scores_prompt);
    const int32_t num_new = ChunkTokens(seq, cached, budget);
    if (num_new > 0 && kv_->NumBlocksNeeded(seq->id, num_new) > kv_->num_free_blocks()) {
      kv_->Free(seq->id);
      return;
    }
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    seq->num_computed = cached;
    RequestState* r = seq->request;
    if (!r->admit_time) {
      r->admit_time = Clock::now();
      r->prefix_hit_tokens = cached;
    }
    running_.push_back(seq);
    if (num_new <= 0) {  // a fork parent whose prompt is all cached
      ForkChildren(seq);
      continue;
    }
    step.plan.new_sequences.push_back(NewSequenceOf(seq));
    std::span<const int32_t> tokens(seq->tokens.data() + cached, num_new);
    std::optional<std::vector<kv::BlockCopy>> copies = kv_->AppendTokens(seq->id, tokens);
    CHECK(copies.has_value(), "blocks were checked free for sequence %d", seq->id.value());
    step.plan.copies.insert(step.plan.copies.end(), copies->begin(), copies->end());
    seq->scheduled = num_new;
    budget -= num_new;
    step.sequences.push_back(seq);
  }
}

worker::SequenceStep Scheduler::SequenceStepOf(const Sequence* seq) const {
  worker::SequenceStep s;
  s.id = seq->id;
  s.tokens.assign(seq->tokens.begin() + seq->num_computed,
                  seq->tokens.begin() + seq->num_computed + seq->scheduled);
  s.start_pos = seq->num_computed;
  const DraftProposalState& proposal = seq->draft.proposal;
  if (proposal.num_in_step > 0) {
    s.tokens.insert(s.tokens.end(), proposal.tokens.begin(),
                    proposal.tokens.begin() + proposal.num_in_step);
    s.num_draft_tokens = proposal.num_in_step;
    s.draft_probs.assign(proposal.probs.begin(), proposal.probs.begin() + proposal.num_in_step);
  }
  std::span<const BlockId> table = kv_->BlockTable(seq->id);
  s.block_table.assign(table.begin(), table.end());
  s.sample = !seq->fork_parent() && seq->num_computed + seq->scheduled == seq->target();
  return s;
}

worker::NewSequence Scheduler::NewSequenceOf(const Sequence* seq) const {
  const RequestState* r = seq->request;
  worker::NewSequence ns;
  ns.id = seq->id;
  ns.prompt_tokens.assign(seq->tokens.begin(), seq->tokens.begin() + seq->prompt_len);
  ns.output_tokens.assign(seq->tokens.begin() + seq->prompt_len, seq->tokens.end());
  ns.params = r->request.params;
  ns.seed = r->seed;
  ns.stream = static_cast<uint64_t>(std::max(0, seq->index));
  return ns;
}

void Scheduler::Preempt(Sequence* seq) {
  ForgetDraft(seq);  // it returns under a new sequence id
  kv_->Free(seq->id);
  seq->num_computed = 0;
  std::erase(running_, seq);
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_front(seq);
  ++stats_.num_preemptions;
}

void Scheduler::ForkInKv(Sequence* parent, Sequence* child) {
  child->id = NextSeqId();
  kv_->Fork(parent->id, child->id);
  child->status = SequenceStatus::kRunning;
  child->num_computed = parent->num_computed;
  running_.push_back(child);
  pending_new_.push_back(NewSequenceOf(child));
}

void Scheduler::ForkChildren(Sequence* parent) {
  for (auto& child : parent->request->completions) {
    if (child->finished()) continue;  // cancelled meanwhile
    ForkInKv(parent, child.get());
  }
  ReleaseSequence(parent);
}

}  // namespace tandem::coordinator
