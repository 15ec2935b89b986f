// Proposer: the draft side of speculative decoding, whatever drafts the
// tokens — a separate small model (ModelProposer), the target's own first L
// layers (layer-skip, a ModelProposer over a truncated Model) or n-gram
// prompt lookup (NgramProposer). The DraftService and the coordinator's
// in-process draft pool work over this interface only; MakeProposer
// (proposer_factory.h) builds one from a --speculative spec.
//
// Contract of one sequence (L = the length the proposer holds, Length()):
//   Propose(seq, new_tokens, start_pos, gamma): start_pos must equal L (0 for
//   a sequence it does not hold); new_tokens holds >= 1 token. The proposer
//   appends new_tokens, then drafts d tokens, 0 <= d <= gamma, and keeps
//   every drafted token except the last as part of the sequence. Afterwards
//   L = start_pos + len(new_tokens) + max(d - 1, 0).
//   Release(seq, keep_length): rolls back to keep_length <= L (the accepted
//   prefix; the coordinator sends the tokens past it, including the target's
//   bonus/correction token, with the next Propose), or forgets the sequence
//   when keep_length == 0.
// Fewer than gamma tokens (possibly none) is a normal answer, not an error:
// every kind stops at the context length, and n-gram lookup drafts only as
// far as it finds a match. The caller then verifies what it got (with d = 0
// the target step is a plain decode step).
//
// Each DraftToken carries q(token) and the processed distribution it was
// drawn from (empty support = one-hot at the token: greedy model drafts and
// every n-gram draft), which is what the target's rejection sampler needs.
//
// Failures: InvalidArgument names the offending value and the limit
// (start_pos != Length, empty new_tokens, gamma < 1, token out of range,
// missing or invalid params where the kind needs them, duplicate seq);
// ResourceExhausted when the proposer is out of capacity (KV blocks,
// sequences). A failed ProposeBatch leaves every sequence of the batch as it
// was (a new one is forgotten).
//
// Thread-safety: implementations are not thread-safe; one caller at a time
// (the DraftService's mutex, or the coordinator's scheduler thread).
#ifndef TANDEM_DRAFT_API_PROPOSER_H_
#define TANDEM_DRAFT_API_PROPOSER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::draft {

// One proposed token.
struct DraftToken {
  int32_t token = -1;
  float prob = 1.0f;  // q(token) under the processed distribution
  // The processed distribution over its support (canonical order); empty for
  // deterministic drafts (greedy, n-gram), meaning one-hot at `token`.
  std::vector<int32_t> support_tokens;
  std::vector<float> support_probs;
};

// One sequence's input to ProposeBatch.
struct ProposeInput {
  SeqId seq;
  std::span<const int32_t> new_tokens;
  int32_t start_pos = 0;
  int32_t gamma = 1;
  // The target's sampling params for the sequence. Null: reuse the
  // sequence's params (a model kind answers InvalidArgument for a new
  // sequence; n-gram lookup needs none).
  const sampling::SamplingParams* params = nullptr;
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// What drafts the tokens.
enum class ProposerKind {
  kModel,      // a separate GGUF model sharing the target's vocabulary
  kLayerSkip,  // the target's first L layers, then its final norm and head
  kNgram,      // prompt lookup in the sequence's own tokens; no model
};

// "model", "layer-skip", "ngram".
std::string_view ProposerKindName(ProposerKind kind);

// Immutable facts about a proposer (what Draft.Info reports).
struct ProposerInfo {
  ProposerKind kind = ProposerKind::kModel;
  // Draft.Info's model_name: the model's general.name for kModel,
  // "layer-skip:L:<target name>" for kLayerSkip, "ngram" for kNgram.
  std::string name;
  int32_t vocab_size = 0;      // token ids are in [0, vocab_size)
  int32_t context_length = 0;  // positions per sequence
  int32_t max_sequences = 0;   // sequences it can hold at once (an upper bound)
};

// Where the last ProposeBatch's time went.
struct ProposeStats {
  double forward_ms = 0;  // model forwards (0 for n-gram)
  double sample_ms = 0;   // choosing the tokens: sampling, or n-gram lookup
  int64_t num_tokens = 0;  // tokens whose K/V the forwards computed (0 for n-gram)
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  virtual const ProposerInfo& info() const = 0;

  // Several sequences at once (a model kind runs one forward per drafting
  // step over all of them). Validates everything before changing state.
  // Results in input order, each of at most that input's gamma tokens.
  virtual absl::StatusOr<std::vector<std::vector<DraftToken>>> ProposeBatch(
      std::span<const ProposeInput> inputs) = 0;

  // One sequence: ProposeBatch of one input.
  absl::StatusOr<std::vector<DraftToken>> Propose(SeqId seq, std::span<const int32_t> new_tokens,
                                                  int32_t start_pos, int32_t gamma,
                                                  const sampling::SamplingParams* params,
                                                  uint64_t seed, uint64_t stream);

  // Rolls `seq` back to keep_length tokens, or forgets it at 0 (a sequence it
  // does not hold is fine at 0). InvalidArgument when keep_length < 0 or
  // > Length(seq), naming both; nothing changes then.
  virtual absl::Status Release(SeqId seq, int32_t keep_length) = 0;

  // Tokens the proposer holds for `seq` (0 when unknown).
  virtual int32_t Length(SeqId seq) const = 0;
  // Sequences it holds now.
  virtual int32_t num_sequences() const = 0;
  virtual const ProposeStats& last_stats() const = 0;
};

// The checks every proposer makes of a batch before changing any state:
// each sequence listed once, start_pos equal to the length `proposer`
// holds, new_tokens non-empty and in [0, vocab_size), gamma >= 1, the
// context length respected, sampling params valid when given.
// InvalidArgument naming the sequence, the value and the limit.
absl::Status ValidateProposeInputs(std::span<const ProposeInput> inputs, const Proposer& proposer);

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_API_PROPOSER_H_
