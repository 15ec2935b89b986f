// Scheduler::Apply: folds a step's result into the requests, one fold per
// decoding mode — sampling (ApplySample: the token, its text, stop checks),
// verification (ApplyVerify, scheduler_speculative.cc) and beam search
// (ApplyBeam, then AdvanceBeams once every beam of a request has its
// candidates) — and forks n > 1 children whose parent finished its prompt.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace tandem::coordinator {

void Scheduler::Apply(ScheduledStep& step, const worker::StepResult& result) {
  absl::flat_hash_map<SeqId, Sequence*> by_id;
  for (Sequence* seq : step.sequences) {
    seq->num_computed += seq->scheduled;
    if (seq->num_computed <= seq->prompt_len) stats_.num_prompt_tokens_computed += seq->scheduled;
    seq->scheduled = 0;
    by_id[seq->id] = seq;
  }
  ApplyPromptLogprobs(by_id, result.prompt_logprobs);
  for (const worker::SequenceResult& res : result.results) {
    auto it = by_id.find(res.id);
    CHECK(it != by_id.end(), "worker returned a result for unscheduled sequence %d",
          res.id.value());
    Sequence* seq = it->second;
    if (seq->finished()) continue;
    if (seq->beam()) {
      ApplyBeam(seq, res);
    } else if (seq->draft.proposal.num_in_step > 0) {
      ApplyVerify(seq, res);
    } else {
      ApplySample(seq, res.sample);
    }
  }
  std::vector<RequestState*> beam_requests;
  for (Sequence* seq : step.sequences) {
    if (seq->fork_parent() && seq->running() && seq->num_computed == seq->target()) {
      ForkChildren(seq);
    }
    RequestState* r = seq->request;
    if (seq->beam() && !r->done &&
        std::find(beam_requests.begin(), beam_requests.end(), r) == beam_requests.end()) {
      beam_requests.push_back(r);
    }
  }
  // Beam requests whose every beam has its candidates take their step.
  for (RequestState* r : beam_requests) AdvanceBeams(r);
  retired_.clear();
  EraseDoneRequests();
}

void Scheduler::ApplyPromptLogprobs(const absl::flat_hash_map<SeqId, Sequence*>& by_id,
                                    std::span<const worker::PromptLogprobs> scored) {
  for (const worker::PromptLogprobs& p : scored) {
    auto it = by_id.find(p.id);
    CHECK(it != by_id.end(), "worker returned prompt logprobs for unscheduled sequence %d",
          p.id.value());
    RequestState* r = it->second->request;
    if (r->prompt_logprobs_sent) continue;  // a recomputed prompt: already sent
    const size_t num_positions = r->request.prompt_tokens.size() - 1;
    r->prompt_logprobs.resize(num_positions);
    for (size_t j = 0; j < p.tokens.size(); ++j) {
      const size_t index = static_cast<size_t>(p.first_position - 1) + j;
      CHECK(index < num_positions, "prompt logprob position %zu past the prompt (%zu tokens)",
            index + 1, num_positions + 1);
      const sampling::SampleResult& s = p.tokens[j];
      r->prompt_logprobs[index] = PositionLogprobs{s.token, s.logprob, s.top_logprobs};
    }
  }
}

void Scheduler::EmitDelta(RequestState* r, CompletionDelta& delta) {
  if (r->request.params.prompt_logprobs >= 0 && !r->prompt_logprobs_sent) {
    delta.prompt_logprobs = r->prompt_logprobs;
    r->prompt_logprobs_sent = true;
  }
  observer_->OnDelta(delta);
}

void Scheduler::ApplySample(Sequence* seq, const sampling::SampleResult& sample) {
  RequestState* r = seq->request;
  if (!r->first_token_time) r->first_token_time = Clock::now();
  const int32_t token = sample.token;
  seq->tokens.push_back(token);
  Completion& c = seq->completion;
  c.token_ids.push_back(token);
  PositionLogprobs lp{token, sample.logprob, sample.top_logprobs};
  CompletionDelta delta;
  delta.id = r->request.id;
  delta.index = seq->index;
  delta.token_ids.push_back(token);
  if (r->request.params.logprobs > 0) delta.logprobs.push_back(lp);
  c.logprobs.push_back(std::move(lp));
  ++stats_.num_generated_tokens;
  const FinishReason reason = CheckStop(seq, token, delta);
  c.text += delta.text;
  delta.finish_reason = reason;
  EmitDelta(r, delta);
  if (reason != FinishReason::kNone) FinishSequence(seq, reason);
}

FinishReason Scheduler::CheckStop(Sequence* seq, int32_t token, CompletionDelta& delta) {
  const sampling::SamplingParams& params = seq->request->request.params;
  FinishReason reason = FinishReason::kNone;
  const bool is_stop_token = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                       token) != params.stop_token_ids.end();
  const bool is_eos =
      !params.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
  if (is_stop_token || is_eos) {
    reason = FinishReason::kStop;
  } else {
    sampling::StopChecker::Update update =
        seq->stop_checker->Append(seq->detokenizer->Append(token));
    delta.text = std::move(update.emit);
    if (update.stopped) reason = FinishReason::kStop;
  }
  if (reason == FinishReason::kNone &&
      (static_cast<int32_t>(seq->completion.token_ids.size()) >= params.max_tokens ||
       static_cast<int64_t>(seq->tokens.size()) >= group_->info().context_length)) {
    reason = FinishReason::kLength;
  }
  if (reason != FinishReason::kNone && !seq->stop_checker->stopped()) {
    // Release text held back for a possible stop string or a partial UTF-8 sequence.
    delta.text += seq->stop_checker->Append(seq->detokenizer->Flush()).emit;
    delta.text += seq->stop_checker->Flush();
  }
  return reason;
}

void Scheduler::ApplyBeam(Sequence* seq, const worker::SequenceResult& result) {
  RequestState* r = seq->request;
  if (!r->first_token_time) r->first_token_time = Clock::now();
  std::vector<BeamCandidate>& candidates = seq->beam_candidates.emplace();
  for (const sampling::BeamToken& t : result.sample.beam_candidates) {
    candidates.push_back({t.token, t.score, t.key});
  }
  DraftProposalState& proposal = seq->draft.proposal;
  const int32_t g = proposal.num_in_step;
  if (g == 0) return;
  // Speculative beam search: the candidates after the token now, those
  // after each draft for the beam steps that follow the draft.
  BeamDraftWalk& walk = seq->draft.beam;
  walk.proposed_at = static_cast<int32_t>(seq->tokens.size());
  walk.proposed.assign(proposal.tokens.begin(), proposal.tokens.begin() + g);
  walk.ahead = walk.proposed;
  walk.ahead_candidates.clear();
  for (const auto& row : result.draft_beam_candidates) {
    std::vector<BeamCandidate>& out = walk.ahead_candidates.emplace_back();
    for (const sampling::BeamToken& t : row) out.push_back({t.token, t.score, t.key});
  }
  if (static_cast<int32_t>(walk.ahead_candidates.size()) != g) {
    walk.Leave();  // a worker without rows: no shortcut
    kv_->Truncate(seq->id, seq->num_computed);
  }
  CountSpeculation(r, {.rounds = 1, .draft_tokens = g});
  proposal.Clear();
}

}  // namespace tandem::coordinator
