// Scheduler's speculative-decoding methods. Each step, before the batch is
// built, ProposeDrafts asks the draft pool for the decoding sequences'
// proposals (gamma fixed or chosen by the GammaController); the step then
// computes each such sequence's token plus its drafts, the worker verifies
// them (engine/sampling/speculative_verifier.h) and ApplyVerify keeps the
// accepted prefix: K/V truncated past it, the draft rolled back to it, the
// emitted tokens sampled into the sequence one by one (stop checks and
// max_tokens apply to each).
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace tandem::coordinator {

absl::StatusOr<int32_t> ParseNumSpeculativeTokens(const std::string& text) {
  if (text == "auto") return 0;
  int32_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1 || n > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_speculative_tokens '%s' is invalid: must be \"auto\" or a number in [1, 64]", text));
  }
  return n;
}

void Scheduler::set_draft_pool(DraftPool* pool, const SpeculationConfig& config) {
  draft_pool_ = pool;
  speculation_ = config;
  gamma_controller_ = GammaController(config.auto_gamma);
}

Scheduler::Sequence* Scheduler::ChooseProbe() const {
  // The same sequence while it can, so the draft pays one prompt prefill and
  // the next calls measure its steady cost.
  Sequence* probe = nullptr;
  for (Sequence* seq : running_) {
    if (!seq->CanPropose()) continue;
    if (probe == nullptr || (seq->draft.held_len > 0 && probe->draft.held_len == 0)) probe = seq;
  }
  return probe;
}

int32_t Scheduler::ChooseGamma(const Sequence* seq, int64_t step_tokens, int64_t step_sequences,
                               bool probing) {
  const RequestState* r = seq->request;
  const int32_t len = static_cast<int32_t>(seq->tokens.size());
  // Drafts past max_tokens or the context would be thrown away.
  const int32_t room = std::min(r->request.params.max_tokens - (len - seq->prompt_len),
                                group_->info().context_length - len) -
                       1;
  int32_t gamma = r->request.num_speculative_tokens.value_or(speculation_.num_speculative_tokens);
  if (gamma == 0) {
    gamma = gamma_controller_.Choose(seq->draft.acceptance, std::max<int64_t>(1, step_tokens),
                                     std::max<int64_t>(1, step_sequences));
    if (probing) gamma = std::max(gamma, 1);
  }
  return std::min(gamma, room);
}

std::optional<DraftRequest> Scheduler::DraftRequestOf(Sequence* seq, int32_t gamma) {
  const RequestState* r = seq->request;
  const int32_t len = static_cast<int32_t>(seq->tokens.size());
  if (seq->draft.held_len >= len) {
    // The draft already saw the last token (a proposal that did not make
    // it into a step, or that drafted nothing): it must see it again.
    RollBackDraft(seq, len - 1);
    if (!seq->draft.active) return std::nullopt;
  }
  DraftRequest d;
  d.seq = seq->id;
  d.new_tokens.assign(seq->tokens.begin() + seq->draft.held_len, seq->tokens.end());
  d.start_pos = seq->draft.held_len;
  d.gamma = gamma;
  d.params = &r->draft_params;
  d.seed = r->seed;
  d.stream = static_cast<uint64_t>(std::max(0, seq->index));
  d.kind = r->request.draft;
  return d;
}

void Scheduler::ProposeDrafts() {
  if (draft_pool_ == nullptr) return;
  // The step this proposal joins: tokens it will compute and sequences it
  // generates for (the cost model of the auto gamma).
  int64_t step_tokens = 0;
  int64_t step_sequences = 0;
  for (const Sequence* seq : running_) {
    const int32_t left = seq->target() - seq->num_computed;
    step_tokens += std::max(0, left);
    if (left == 1) ++step_sequences;
  }
  step_tokens = std::min<int64_t>(step_tokens, config_.max_num_batched_tokens);
  const bool probing =
      speculation_.num_speculative_tokens == 0 && !gamma_controller_.draft_cost_known();
  const Sequence* probe = probing ? ChooseProbe() : nullptr;
  std::vector<DraftRequest> requests;
  std::vector<Sequence*> asking;
  std::vector<bool> catching_up;  // per request: only a chunk of history went
  int64_t prefill_left = speculation_.max_draft_prefill_tokens;
  for (Sequence* seq : running_) {
    seq->draft.proposal.Clear();
    if (!seq->CanPropose() || (probing && seq != probe)) continue;
    // The step as it stands: plain tokens plus the drafts chosen so far.
    const int32_t gamma = ChooseGamma(seq, step_tokens, step_sequences, probing);
    if (gamma < 1) continue;
    std::optional<DraftRequest> d = DraftRequestOf(seq, gamma);
    if (!d.has_value()) continue;
    const std::optional<bool> whole = FitCatchUp(*d, prefill_left);
    if (!whole.has_value()) continue;
    if (*whole) step_tokens += gamma;
    requests.push_back(*std::move(d));
    asking.push_back(seq);
    catching_up.push_back(!*whole);
  }
  if (requests.empty()) return;
  TANDEM_LOG(kVerbose, "speculation: %d sequences, gamma %d, cost %.2f + %.3f/token ms, draft %.3f ms/position, prior acceptance %.2f",
             requests.size(), requests[0].gamma, gamma_controller_.fixed_ms(),
             gamma_controller_.per_token_ms(), gamma_controller_.draft_ms_per_position(),
             gamma_controller_.prior_acceptance());
  const absl::Time propose_start = absl::Now();
  std::vector<DraftProposal> proposals = draft_pool_->Propose(requests);
  propose_ms_ = absl::ToDoubleMilliseconds(absl::Now() - propose_start);
  ObserveProposeCost(requests, catching_up);
  for (size_t i = 0; i < asking.size(); ++i) {
    DraftState& draft = asking[i]->draft;
    DraftProposal& p = proposals[i];
    if (!p.ok) {
      draft.Deactivate();  // the draft is lost for this sequence: plain decoding from now on
      continue;
    }
    const int32_t k = static_cast<int32_t>(p.tokens.size());
    draft.held_len = requests[i].start_pos + static_cast<int32_t>(requests[i].new_tokens.size()) +
                     std::max(0, k - 1);
    if (catching_up[i]) continue;  // a guess from mid-history: not a proposal
    draft.proposal.tokens = std::move(p.tokens);
    draft.proposal.probs = std::move(p.probs);
  }
}

std::optional<bool> Scheduler::FitCatchUp(DraftRequest& d, int64_t& prefill_left) {
  const int64_t catch_up = static_cast<int64_t>(d.new_tokens.size()) - 1;  // past the last token
  if (catch_up <= d.gamma) return true;  // steady state: accepted drafts and the correction
  if (prefill_left <= 0) return std::nullopt;
  if (catch_up <= prefill_left) {
    prefill_left -= catch_up;
    return true;
  }
  // The chunk ends inside the history; the draft drafts one token there
  // (gamma >= 1 is the proposer contract) that the caller drops.
  d.new_tokens.resize(static_cast<size_t>(prefill_left));
  d.gamma = 1;
  prefill_left = 0;
  return false;
}

void Scheduler::ObserveProposeCost(std::span<const DraftRequest> requests,
                                   const std::vector<bool>& catching_up) {
  int32_t positions = 0;
  bool prefill = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& d = requests[i];
    positions = std::max(positions, d.gamma);
    // Steady state feeds the draft the last round's accepted tokens and
    // the correction; more means a prompt (a new or restarted sequence).
    prefill |= catching_up[i] || static_cast<int32_t>(d.new_tokens.size()) > d.gamma + 1;
  }
  if (!prefill) gamma_controller_.ObserveDraft(positions, propose_ms_);
}

void Scheduler::ApplyVerify(Sequence* seq, const worker::SequenceResult& result) {
  const int32_t accepted = static_cast<int32_t>(result.accepted_drafts.size());
  const int32_t proposed = seq->draft.proposal.num_in_step;
  const int32_t len_before = static_cast<int32_t>(seq->tokens.size());
  // The step computed K/V for the token and every draft; keep the token's
  // and the accepted drafts'.
  seq->num_computed += accepted;
  kv_->Truncate(seq->id, seq->num_computed);
  CountSpeculation(seq->request, {1, proposed, accepted});
  gamma_controller_.UpdateAcceptance(seq->draft.acceptance, accepted, proposed);
  seq->draft.proposal.Clear();
  // The draft keeps what is still the sequence's history.
  RollBackDraft(seq, len_before + accepted);
  for (const sampling::SampleResult& token : result.accepted_drafts) {
    ApplySample(seq, token);
    if (seq->finished()) return;
  }
  ApplySample(seq, result.sample);
}

void Scheduler::DropUnusedDrafts() {
  for (Sequence* seq : running_) {
    if (seq->draft.proposal.empty() || seq->draft.proposal.num_in_step > 0) continue;
    // Proposed but not sent (no budget or blocks this step): the draft
    // holds tokens past the sequence; roll it back to the sequence.
    seq->draft.proposal.Clear();
    RollBackDraft(seq, static_cast<int32_t>(seq->tokens.size()));
  }
}

void Scheduler::RollBackDraft(Sequence* seq, int32_t keep) {
  DraftState& draft = seq->draft;
  if (keep >= draft.held_len) return;
  if (draft_pool_ != nullptr && draft_pool_->Release(seq->id, keep)) {
    draft.held_len = keep;
  } else {
    draft.Deactivate();
  }
}

void Scheduler::ForgetDraft(Sequence* seq) {
  DraftState& draft = seq->draft;
  draft.beam.Leave();
  draft.beam.proposed.clear();
  draft.proposal.Clear();
  if (draft_pool_ != nullptr && draft.held_len > 0) draft_pool_->Release(seq->id, 0);
  draft.held_len = 0;
}

void Scheduler::CountSpeculation(RequestState* r, const SpeculationCounts& counts) {
  r->speculation.Add(counts);
  std::vector<int64_t>& by_position = r->accepted_per_position;
  if (static_cast<int64_t>(by_position.size()) < counts.accepted_tokens) {
    by_position.resize(static_cast<size_t>(counts.accepted_tokens));
  }
  for (int64_t i = 0; i < counts.accepted_tokens; ++i) ++by_position[static_cast<size_t>(i)];
  stats_.num_speculative_rounds += counts.rounds;
  stats_.num_draft_tokens += counts.draft_tokens;
  stats_.num_accepted_tokens += counts.accepted_tokens;
}

}  // namespace tandem::coordinator
