// Scheduler's beam-search methods (see coordinator/decoding/beam_search.h):
// a beam request runs as one sequence per beam; after a step in which every
// running beam received its candidates, AdvanceBeams continues, forks
// (copy-on-write) or drops beams as the search decides.
#include <algorithm>

#include "common/logging.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduler_state.h"

namespace tandem::coordinator {

std::unique_ptr<Scheduler::Sequence> Scheduler::MakeBeamSequence(RequestState* r,
                                                                 std::vector<int32_t> tokens) {
  auto s = std::make_unique<Sequence>();
  s->request = r;
  s->index = static_cast<int32_t>(r->next_beam_stream++);
  s->tokens = std::move(tokens);
  s->prompt_len = static_cast<int32_t>(r->request.prompt_tokens.size());
  s->beam = true;
  return s;
}

void Scheduler::AdmitBeamSearch(RequestState* r) {
  GenerateRequest& req = r->request;
  std::vector<int32_t> eos;
  if (!req.params.ignore_eos) eos = eos_ids_;
  for (int32_t t : req.params.stop_token_ids) {
    if (std::find(eos.begin(), eos.end(), t) == eos.end()) eos.push_back(t);
  }
  const int32_t room =
      group_->info().context_length - static_cast<int32_t>(req.prompt_tokens.size());
  r->beam = std::make_unique<BeamSearch>(*req.beam, std::move(eos),
                                         std::min(req.params.max_tokens, room));
  // What the worker does with every beam row: candidates, not a token.
  req.params.beam_candidates = r->beam->candidates_per_beam();
  req.params.beam_sample = req.beam->do_sample;
  r->num_unfinished = 1;
  r->beams.push_back(MakeBeamSequence(r, req.prompt_tokens));
  Sequence* first = r->beams.back().get();
  first->in_waiting = true;
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), first,
                              [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
  waiting_.insert(pos, first);
}

void Scheduler::AdvanceBeams(RequestState* r) {
  for (const auto& b : r->beams) {
    if (!b->has_candidates) return;  // some beam has not run this round yet
  }
  std::vector<std::vector<BeamCandidate>> candidates;
  for (auto& b : r->beams) {
    candidates.push_back(std::move(b->candidates));
    b->candidates.clear();
    b->has_candidates = false;
  }
  const std::vector<BeamMove> moves = r->beam->Step(candidates);
  stats_.num_generated_tokens += static_cast<int64_t>(candidates.size());
  if (r->beam->done()) {
    FinishBeamSearch(r, FinishReason::kNone);
    return;
  }
  // Each move continues its parent: the first reuses the parent's sequence,
  // later ones fork it (copy-on-write KV) before any of them appends.
  std::vector<std::unique_ptr<Sequence>> old = std::move(r->beams);
  std::vector<Sequence*> parents;
  for (const auto& b : old) parents.push_back(b.get());
  std::vector<bool> reused(old.size(), false);
  std::vector<int32_t> appended;
  for (const BeamMove& m : moves) {
    Sequence* parent = parents[m.parent];
    if (!reused[m.parent]) {
      reused[m.parent] = true;
      r->beams.push_back(std::move(old[m.parent]));
    } else {
      std::unique_ptr<Sequence> child = MakeBeamSequence(r, parent->tokens);
      if (parent->in_kv) {
        ForkInKv(parent, child.get());
      } else {
        // The parent was preempted: the child recomputes from the waiting queue.
        child->in_waiting = true;
        auto pos = std::upper_bound(
            waiting_.begin(), waiting_.end(), child.get(),
            [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
        waiting_.insert(pos, child.get());
      }
      r->beams.push_back(std::move(child));
    }
    appended.push_back(m.token);
  }
  for (size_t i = 0; i < r->beams.size(); ++i) r->beams[i]->tokens.push_back(appended[i]);
  for (auto& b : old) {
    if (b == nullptr) continue;  // reused
    ReleaseSequence(b.get());
    retired_.push_back(std::move(b));
  }
  EmitBestBeam(r, FinishReason::kNone);
}

void Scheduler::EmitBestBeam(RequestState* r, FinishReason reason) {
  CompletionDelta delta;
  delta.id = r->request.id;
  delta.index = 0;
  delta.replace = true;
  delta.token_ids = r->beam->BestTokens();
  absl::StatusOr<std::string> text = tokenizer_->Decode(delta.token_ids, /*skip_special=*/true);
  if (text.ok()) delta.text = *std::move(text);
  delta.finish_reason = reason;
  observer_->OnDelta(delta);
}

void Scheduler::FinishBeamSearch(RequestState* r, FinishReason forced) {
  for (auto& b : r->beams) {
    ReleaseSequence(b.get());
    retired_.push_back(std::move(b));
  }
  r->beams.clear();
  if (forced == FinishReason::kNone) {
    for (BeamHypothesis& h : r->beam->Finalize()) {
      Completion c;
      absl::StatusOr<std::string> text = tokenizer_->Decode(h.tokens, /*skip_special=*/true);
      if (text.ok()) c.text = *std::move(text);
      c.token_ids = std::move(h.tokens);
      if (h.ended_with_eos) c.token_ids.push_back(h.eos_token);
      c.finish_reason = h.ended_with_eos ? FinishReason::kStop : FinishReason::kLength;
      c.score = h.score;
      r->beam_results.push_back(std::move(c));
    }
    if (!r->beam_results.empty()) {
      CompletionDelta delta;
      delta.id = r->request.id;
      delta.replace = true;
      delta.token_ids = r->beam_results[0].token_ids;
      delta.text = r->beam_results[0].text;
      delta.finish_reason = r->beam_results[0].finish_reason;
      observer_->OnDelta(delta);
    }
  } else {
    // Cancelled or failed: the best beam so far is the answer.
    Completion c;
    c.token_ids = r->beam->BestTokens();
    absl::StatusOr<std::string> text = tokenizer_->Decode(c.token_ids, /*skip_special=*/true);
    if (text.ok()) c.text = *std::move(text);
    c.finish_reason = forced;
    r->beam_results.push_back(std::move(c));
  }
  r->num_unfinished = 0;
  MaybeCompleteRequest(r);
}

}  // namespace tandem::coordinator
