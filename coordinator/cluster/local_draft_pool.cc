#include "coordinator/cluster/local_draft_pool.h"

#include "common/logging.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"

namespace tandem::coordinator {

sampling::DraftProbs ToDraftProbs(const draft::DraftToken& token) {
  sampling::DraftProbs p;
  p.prob = token.prob;
  p.support_tokens = token.support_tokens;
  p.support_probs = token.support_probs;
  return p;
}

std::vector<DraftProposal> LocalDraftPool::Propose(std::span<const DraftRequest> requests) {
  std::vector<draft::ProposeInput> inputs;
  inputs.reserve(requests.size());
  for (const DraftRequest& r : requests) {
    draft::ProposeInput in;
    in.seq = r.seq;
    in.new_tokens = r.new_tokens;
    in.start_pos = r.start_pos;
    in.gamma = r.gamma;
    in.params = r.params;
    in.seed = r.seed;
    in.stream = r.stream;
    inputs.push_back(in);
  }
  std::vector<DraftProposal> out(requests.size());
  absl::StatusOr<std::vector<std::vector<draft::DraftToken>>> proposed =
      proposer_->ProposeBatch(inputs);
  if (!proposed.ok()) {
    TANDEM_LOG(kError, "draft %s failed for %d sequences; they decode without it: %s", name(),
               requests.size(), proposed.status().ToString());
    for (size_t i = 0; i < requests.size(); ++i) {
      out[i].ok = false;
      (void)proposer_->Release(requests[i].seq, 0);
    }
    return out;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    for (const draft::DraftToken& t : (*proposed)[i]) {
      out[i].tokens.push_back(t.token);
      out[i].probs.push_back(ToDraftProbs(t));
    }
  }
  return out;
}

bool LocalDraftPool::Release(SeqId seq, int32_t keep_length) {
  absl::Status s = proposer_->Release(seq, keep_length);
  if (s.ok()) return true;
  TANDEM_LOG(kError, "draft %s: release of sequence %d to %d failed; forgetting it: %s", name(),
             seq.value(), keep_length, s.ToString());
  (void)proposer_->Release(seq, 0);
  return false;
}

std::function<std::unique_ptr<DraftPool>()> NgramDraftPoolMaker(
    int32_t block_size, int32_t vocab_size, std::vector<int32_t> eos_token_ids) {
  draft::ProposerOptions options;
  options.spec.kind = draft::ProposerKind::kNgram;
  options.block_size = block_size;
  options.vocab_size = vocab_size;
  options.eos_token_ids = std::move(eos_token_ids);
  return [options]() -> std::unique_ptr<DraftPool> {
    absl::StatusOr<std::unique_ptr<draft::Proposer>> p = draft::MakeProposer(options);
    CHECK(p.ok(), "the n-gram draft failed to start: %s", p.status().ToString());
    return std::make_unique<LocalDraftPool>(*std::move(p));
  };
}

bool LocalDraftPool::Serves(std::string_view kind) const {
  return kind.empty() ||
         draft::DraftKindMatches(kind, draft::DraftKindOfName(proposer_->info().name));
}

}  // namespace tandem::coordinator
