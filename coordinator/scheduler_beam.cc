// Scheduler's beam-search methods (see coordinator/decoding/beam_search.h):
// a beam request runs as one sequence per beam; after a step in which every
// running beam received its candidates, AdvanceBeams continues, forks
// (copy-on-write) or drops beams as the search decides.
#include <algorithm>
#include <limits>

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
  s->speculate = draft_pool_ != nullptr && r->request.num_speculative_tokens.value_or(1) != 0 &&
                 draft_pool_->Serves(r->request.draft);
  s->acceptance = gamma_controller_.NewProfile();
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
  // Each pass is one beam step. With speculation a beam that continues
  // along its draft already has its next candidates (the worker computed
  // them after each draft token), so passes repeat without a forward while
  // every running beam has them.
  while (true) {
    for (const auto& b : r->beams) {
      if (!b->has_candidates) {
        RollBackBeamDrafts(r);
        return;  // some beam needs a forward first
      }
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
    // The first move of a parent reuses its sequence, later ones fork it
    // (copy-on-write KV, draft K/V included) before any of them changes.
    std::vector<std::unique_ptr<Sequence>> old = std::move(r->beams);
    std::vector<Sequence*> parents;
    for (const auto& b : old) parents.push_back(b.get());
    std::vector<bool> reused(old.size(), false);
    std::vector<int64_t> announced;  // index into pending_new_, or -1
    for (const BeamMove& m : moves) {
      Sequence* parent = parents[m.parent];
      if (!reused[m.parent]) {
        reused[m.parent] = true;
        r->beams.push_back(std::move(old[m.parent]));
        announced.push_back(-1);
        continue;
      }
      std::unique_ptr<Sequence> child = MakeBeamSequence(r, parent->tokens);
      child->spec_drafts = parent->spec_drafts;
      child->draft_candidates = parent->draft_candidates;
      if (parent->in_kv) {
        ForkInKv(parent, child.get());
        announced.push_back(static_cast<int64_t>(pending_new_.size()) - 1);
      } else {
        // The parent was preempted: the child recomputes from the waiting queue.
        child->spec_drafts.clear();
        child->draft_candidates.clear();
        child->in_waiting = true;
        auto pos = std::upper_bound(
            waiting_.begin(), waiting_.end(), child.get(),
            [](const Sequence* a, const Sequence* b) { return RunsBefore(a, b); });
        waiting_.insert(pos, child.get());
        announced.push_back(-1);
      }
      r->beams.push_back(std::move(child));
    }
    for (size_t i = 0; i < r->beams.size(); ++i) {
      Sequence* b = r->beams[i].get();
      const int32_t token = moves[i].token;
      b->tokens.push_back(token);
      if (!b->spec_drafts.empty() && b->spec_drafts.front() == token && b->in_kv) {
        // Along the draft: the token's K/V and the candidates after it exist.
        ++b->num_computed;
        b->candidates = std::move(b->draft_candidates.front());
        b->has_candidates = true;
        b->spec_drafts.erase(b->spec_drafts.begin());
        b->draft_candidates.erase(b->draft_candidates.begin());
        if (announced[i] >= 0) pending_new_[announced[i]].output_tokens.push_back(token);
      } else if (!b->spec_drafts.empty()) {
        // Off the draft: drop the K/V computed for the rest of it.
        b->spec_drafts.clear();
        b->draft_candidates.clear();
        if (b->in_kv) kv_->Truncate(b->id, b->num_computed);
      }
    }
    for (auto& b : old) {
      if (b == nullptr) continue;  // reused
      ReleaseSequence(b.get());
      retired_.push_back(std::move(b));
    }
    EmitBestBeam(r, FinishReason::kNone);
  }
}

void Scheduler::RollBackBeamDrafts(RequestState* r) {
  // How far each beam's tokens followed what was proposed to it.
  auto matched_of = [](const Sequence* seq) {
    int32_t matched = 0;
    while (matched < static_cast<int32_t>(seq->proposed.size()) &&
           seq->draft_base + matched < static_cast<int32_t>(seq->tokens.size()) &&
           seq->tokens[seq->draft_base + matched] == seq->proposed[matched]) {
      ++matched;
    }
    return matched;
  };
  // The search takes a step without a forward only while every beam is on
  // its draft, so the request gains what its least-following beam did: that
  // is the acceptance auto gamma learns for each beam.
  int32_t request_matched = std::numeric_limits<int32_t>::max();
  for (auto& b : r->beams) {
    if (!b->proposed.empty()) request_matched = std::min(request_matched, matched_of(b.get()));
  }
  for (auto& b : r->beams) {
    Sequence* seq = b.get();
    if (seq->proposed.empty()) continue;
    const int32_t matched = matched_of(seq);
    if (!seq->spec_drafts.empty()) continue;  // still on the draft: later
    stats_.num_accepted_tokens += matched;
    r->num_accepted_tokens += matched;
    gamma_controller_.UpdateAcceptance(seq->acceptance, std::min(matched, request_matched),
                                       static_cast<int32_t>(seq->proposed.size()));
    seq->proposed.clear();
    const int32_t keep = std::min(seq->draft_len, seq->draft_base + matched);
    if (draft_pool_ != nullptr && keep < seq->draft_len) {
      if (draft_pool_->Release(seq->id, keep)) {
        seq->draft_len = keep;
      } else {
        seq->speculate = false;
        seq->draft_len = 0;
      }
    }
  }
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
