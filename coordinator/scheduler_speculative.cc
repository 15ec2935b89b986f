// Scheduler's speculative-decoding methods. Each step, before the batch is
// built, ProposeDrafts asks the draft pool for the decoding sequences'
// proposals (gamma fixed or chosen by the GammaController); the step then
// computes each such sequence's token plus its drafts, the worker verifies
// them (engine/sampling/speculative_verifier.h) and FoldVerification keeps
// the accepted prefix: K/V truncated past it, the draft rolled back to it,
// the emitted tokens sampled into the sequence one by one (stop checks and
// max_tokens apply to each).
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduler_state.h"

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

void Scheduler::ProposeDrafts() {
  if (draft_pool_ == nullptr) return;
  // The step this proposal joins: tokens it will compute and sequences it
  // generates for (the cost model of the auto gamma).
  int64_t batch_tokens = 0;
  int64_t batch_sequences = 0;
  for (const Sequence* seq : running_) {
    const int32_t left = seq->target() - seq->num_computed;
    batch_tokens += std::max(0, left);
    if (left == 1) ++batch_sequences;
  }
  batch_tokens = std::min<int64_t>(batch_tokens, config_.max_num_batched_tokens);

  std::vector<DraftRequest> requests;
  std::vector<Sequence*> asking;
  int64_t drafted = 0;
  // Auto gamma before the draft's cost is known: one sequence probes the
  // draft (gamma >= 1), the same one while it can, so the draft pays one
  // prompt prefill and the next calls measure its steady cost.
  const bool probing = speculation_.num_speculative_tokens == 0 &&
                       !gamma_controller_.draft_cost_known();
  Sequence* probe = nullptr;
  if (probing) {
    for (Sequence* seq : running_) {
      if (!seq->speculate || seq->finished || seq->fork_parent || seq->has_candidates ||
          seq->num_computed != static_cast<int32_t>(seq->tokens.size()) - 1) {
        continue;
      }
      if (probe == nullptr || (seq->draft_len > 0 && probe->draft_len == 0)) probe = seq;
    }
  }
  for (Sequence* seq : running_) {
    seq->drafts.clear();
    seq->draft_probs.clear();
    RequestState* r = seq->request;
    if (!seq->speculate || seq->finished || seq->fork_parent || seq->has_candidates) continue;
    const int32_t len = static_cast<int32_t>(seq->tokens.size());
    if (seq->num_computed != len - 1) continue;  // prefilling
    // Drafts past max_tokens or the context would be thrown away.
    const int32_t generated = len - seq->prompt_len;
    const int32_t room = std::min(r->request.params.max_tokens - generated,
                                  group_->info().context_length - len) - 1;
    if (probing && seq != probe) continue;
    int32_t gamma = r->request.num_speculative_tokens.value_or(speculation_.num_speculative_tokens);
    if (gamma == 0) {
      // The step as it stands: plain tokens plus the drafts chosen so far.
      gamma = gamma_controller_.Choose(seq->acceptance,
                                       std::max<int64_t>(1, batch_tokens + drafted),
                                       std::max<int64_t>(1, batch_sequences));
      if (probing) gamma = std::max(gamma, 1);
    }
    gamma = std::min(gamma, room);
    if (gamma >= 1) drafted += gamma;
    if (gamma < 1) continue;
    if (seq->draft_len >= len) {
      // The draft already saw the last token (a proposal that did not make
      // it into a step, or that drafted nothing): it must see it again.
      if (!draft_pool_->Release(seq->id, len - 1)) {
        seq->speculate = false;
        seq->draft_len = 0;
        continue;
      }
      seq->draft_len = len - 1;
    }
    DraftRequest d;
    d.seq = seq->id;
    d.new_tokens.assign(seq->tokens.begin() + seq->draft_len, seq->tokens.end());
    d.start_pos = seq->draft_len;
    d.gamma = gamma;
    d.params = &r->draft_params;
    d.seed = r->seed;
    d.stream = static_cast<uint64_t>(std::max(0, seq->index));
    d.kind = r->request.draft;
    requests.push_back(std::move(d));
    asking.push_back(seq);
  }
  if (requests.empty()) return;
  TANDEM_LOG(kVerbose, "speculation: %d sequences, gamma %d, cost %.2f + %.3f/token ms, draft %.3f ms/position, prior acceptance %.2f",
             requests.size(), requests[0].gamma, gamma_controller_.fixed_ms(),
             gamma_controller_.per_token_ms(), gamma_controller_.draft_ms_per_position(),
             gamma_controller_.prior_acceptance());
  const absl::Time propose_start = absl::Now();
  std::vector<DraftProposal> proposals = draft_pool_->Propose(requests);
  propose_ms_ = absl::ToDoubleMilliseconds(absl::Now() - propose_start);
  int32_t positions = 0;
  bool prefill = false;
  for (const DraftRequest& d : requests) {
    positions = std::max(positions, d.gamma);
    // Steady state feeds the draft the last round's accepted tokens and
    // the correction; more means a prompt (a new or restarted sequence).
    prefill |= static_cast<int32_t>(d.new_tokens.size()) > d.gamma + 1;
  }
  if (!prefill) {
    gamma_controller_.ObserveDraft(positions, propose_ms_);
  }
  for (size_t i = 0; i < asking.size(); ++i) {
    Sequence* seq = asking[i];
    DraftProposal& p = proposals[i];
    if (!p.ok) {
      // The draft is lost for this sequence: it decodes plainly from now on.
      seq->speculate = false;
      seq->draft_len = 0;
      continue;
    }
    const int32_t k = static_cast<int32_t>(p.tokens.size());
    seq->draft_len = requests[i].start_pos + static_cast<int32_t>(requests[i].new_tokens.size()) +
                     std::max(0, k - 1);
    seq->drafts = std::move(p.tokens);
    seq->draft_probs = std::move(p.probs);
  }
}

void Scheduler::FoldVerification(Sequence* seq, const worker::SequenceResult& result) {
  RequestState* r = seq->request;
  const int32_t accepted = static_cast<int32_t>(result.accepted_drafts.size());
  const int32_t proposed = seq->num_step_drafts;
  const int32_t len_before = static_cast<int32_t>(seq->tokens.size());
  // The step computed K/V for the token and every draft; keep the token's
  // and the accepted drafts'.
  seq->num_computed += accepted;
  kv_->Truncate(seq->id, seq->num_computed);
  ++stats_.num_speculative_rounds;
  stats_.num_draft_tokens += proposed;
  stats_.num_accepted_tokens += accepted;
  ++r->num_speculative_rounds;
  r->num_draft_tokens += proposed;
  r->num_accepted_tokens += accepted;
  gamma_controller_.UpdateAcceptance(seq->acceptance, accepted, proposed);
  seq->drafts.clear();
  seq->draft_probs.clear();
  seq->num_step_drafts = 0;
  // The draft keeps what is still the sequence's history.
  const int32_t keep = std::min(seq->draft_len, len_before + accepted);
  if (keep < seq->draft_len) {
    if (draft_pool_->Release(seq->id, keep)) {
      seq->draft_len = keep;
    } else {
      seq->speculate = false;
      seq->draft_len = 0;
    }
  }
  for (const sampling::SampleResult& token : result.accepted_drafts) {
    OnSampled(seq, token);
    if (seq->finished) return;
  }
  OnSampled(seq, result.sample);
}

void Scheduler::DropUnusedDrafts() {
  for (Sequence* seq : running_) {
    if (seq->drafts.empty() || seq->num_step_drafts > 0) continue;
    // Proposed but not sent (no budget or blocks this step): the draft
    // holds tokens past the sequence; roll it back to the sequence.
    seq->drafts.clear();
    seq->draft_probs.clear();
    const int32_t len = static_cast<int32_t>(seq->tokens.size());
    if (seq->draft_len > len) {
      if (draft_pool_->Release(seq->id, len)) {
        seq->draft_len = len;
      } else {
        seq->speculate = false;
        seq->draft_len = 0;
      }
    }
  }
}

void Scheduler::ForgetDraft(Sequence* seq) {
  seq->spec_drafts.clear();
  seq->draft_candidates.clear();
  seq->proposed.clear();
  seq->drafts.clear();
  seq->draft_probs.clear();
  seq->num_step_drafts = 0;
  if (draft_pool_ != nullptr && seq->draft_len > 0) draft_pool_->Release(seq->id, 0);
  seq->draft_len = 0;
}

}  // namespace tandem::coordinator
