// Scheduler's beam-search methods (see coordinator/decoding/beam_search.h):
// a beam request runs as one sequence per beam; after a step in which every
// running beam received its candidates, AdvanceBeams continues, forks
// (copy-on-write) or drops beams as the search decides.
#include <algorithm>
#include <limits>

#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace tandem::coordinator {

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
  r->beams.push_back(MakeSequence(r, static_cast<int32_t>(r->next_beam_stream++),
                                  req.prompt_tokens));
  r->beams.back()->role = SequenceRole::kBeam;
  EnqueueWaiting(r->beams.back().get());
}

void Scheduler::AdvanceBeams(RequestState* r) {
  // Each pass is one beam step. With speculation a beam that continues
  // along its draft already has its next candidates (the worker computed
  // them after each draft token), so passes repeat without a forward while
  // every running beam has them.
  while (true) {
    for (const auto& b : r->beams) {
      if (!b->beam_candidates.has_value()) {
        RollBackBeamDrafts(r);
        return;  // some beam needs a forward first
      }
    }
    if (!TakeBeamStep(r)) return;
  }
}

bool Scheduler::TakeBeamStep(RequestState* r) {
  std::vector<std::vector<BeamCandidate>> candidates;
  for (auto& b : r->beams) {
    candidates.push_back(*std::move(b->beam_candidates));
    b->beam_candidates.reset();
  }
  const std::vector<BeamMove> moves = r->beam->Step(candidates);
  stats_.num_generated_tokens += static_cast<int64_t>(candidates.size());
  if (r->beam->done()) {
    FinishBeamSearch(r, FinishReason::kNone);
    return false;
  }
  for (std::unique_ptr<Sequence>& b : MoveBeams(r, moves)) {
    ReleaseSequence(b.get());
    retired_.push_back(std::move(b));
  }
  EmitBestBeam(r, FinishReason::kNone);
  return true;
}

std::vector<std::unique_ptr<Scheduler::Sequence>> Scheduler::MoveBeams(
    RequestState* r, const std::vector<BeamMove>& moves) {
  // The first move of a parent reuses its sequence, later ones fork it
  // (copy-on-write KV, draft K/V included) before any of them changes.
  std::vector<std::unique_ptr<Sequence>> old = std::move(r->beams);
  r->beams.clear();
  std::vector<Sequence*> parents;
  for (const auto& b : old) parents.push_back(b.get());
  std::vector<int64_t> announced;  // index into pending_new_, or -1
  for (const BeamMove& m : moves) {
    Sequence* parent = parents[m.parent];
    announced.push_back(-1);
    if (old[m.parent] != nullptr) {
      r->beams.push_back(std::move(old[m.parent]));
      continue;
    }
    std::unique_ptr<Sequence> child =
        MakeSequence(r, static_cast<int32_t>(r->next_beam_stream++), parent->tokens);
    child->role = SequenceRole::kBeam;
    ++stats_.num_beam_forks;
    if (parent->running()) {
      child->draft.beam.ahead = parent->draft.beam.ahead;
      child->draft.beam.ahead_candidates = parent->draft.beam.ahead_candidates;
      ForkInKv(parent, child.get());
      announced.back() = static_cast<int64_t>(pending_new_.size()) - 1;
    } else {
      EnqueueWaiting(child.get());  // the parent was preempted: the child recomputes
    }
    r->beams.push_back(std::move(child));
  }
  for (size_t i = 0; i < r->beams.size(); ++i) {
    ExtendBeam(r->beams[i].get(), moves[i].token,
               announced[i] >= 0 ? &pending_new_[announced[i]] : nullptr);
  }
  std::erase(old, nullptr);
  return old;
}

void Scheduler::ExtendBeam(Sequence* b, int32_t token, worker::NewSequence* announced) {
  b->tokens.push_back(token);
  BeamDraftWalk& walk = b->draft.beam;
  if (!walk.on_draft()) return;
  if (walk.ahead.front() == token && b->running()) {
    // Along the draft: the token's K/V and the candidates after it exist.
    ++b->num_computed;
    b->beam_candidates = std::move(walk.ahead_candidates.front());
    walk.ahead.erase(walk.ahead.begin());
    walk.ahead_candidates.erase(walk.ahead_candidates.begin());
    if (announced != nullptr) announced->output_tokens.push_back(token);
  } else {
    // Off the draft: drop the K/V computed for the rest of it.
    walk.Leave();
    if (b->running()) kv_->Truncate(b->id, b->num_computed);
  }
}

void Scheduler::RollBackBeamDrafts(RequestState* r) {
  // The search takes a step without a forward only while every beam is on
  // its draft, so the request gains what its least-following beam did: that
  // is the acceptance auto gamma learns for each beam.
  int32_t request_matched = std::numeric_limits<int32_t>::max();
  for (auto& b : r->beams) {
    const BeamDraftWalk& walk = b->draft.beam;
    if (!walk.proposed.empty()) request_matched = std::min(request_matched, walk.Matched(b->tokens));
  }
  for (auto& b : r->beams) {
    Sequence* seq = b.get();
    BeamDraftWalk& walk = seq->draft.beam;
    if (walk.proposed.empty() || walk.on_draft()) continue;  // on the draft: later
    const int32_t matched = walk.Matched(seq->tokens);
    CountSpeculation(r, {.accepted_tokens = matched});
    gamma_controller_.UpdateAcceptance(seq->draft.acceptance, std::min(matched, request_matched),
                                       static_cast<int32_t>(walk.proposed.size()));
    walk.proposed.clear();
    RollBackDraft(seq, walk.proposed_at + matched);
  }
}

// Valid UTF-8 always (an invalid or unfinished byte sequence becomes U+FFFD,
// as in streamed text): the text goes into proto string fields and JSON,
// and a beam of a model that emits raw byte tokens may end inside a character.
std::string Scheduler::DecodeText(const std::vector<int32_t>& tokens) const {
  return tokenizer::DecodeValidUtf8(*tokenizer_, tokens, /*skip_special=*/true);
}

void Scheduler::EmitBestBeam(RequestState* r, FinishReason reason) {
  CompletionDelta delta;
  delta.id = r->request.id;
  delta.index = 0;
  delta.replace = true;
  delta.token_ids = r->beam->BestTokens();
  delta.text = DecodeText(delta.token_ids);
  delta.finish_reason = reason;
  EmitDelta(r, delta);
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
      c.text = DecodeText(h.tokens);
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
      EmitDelta(r, delta);
    }
  } else {
    // Cancelled or failed: the best beam so far is the answer.
    Completion c;
    c.token_ids = r->beam->BestTokens();
    c.text = DecodeText(c.token_ids);
    c.finish_reason = forced;
    r->beam_results.push_back(std::move(c));
  }
  r->num_unfinished = 0;
  MaybeCompleteRequest(r);
}

}  // namespace tandem::coordinator
