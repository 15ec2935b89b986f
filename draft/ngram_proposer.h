// NgramProposer: prompt lookup decoding, the Proposer (proposer.h) that needs
// no model. Output often repeats spans of the prompt or of itself (code
// edits, quotes, extraction, lists); the target verifies such copies cheaply.
//
// Per sequence it keeps the token history the contract feeds it (the first
// Propose's new_tokens, then the accepted tokens, plus its own drafts until
// Release rolls them back). To propose, it looks for the longest suffix of the
// history of length n in [min_n, max_n] that occurred earlier; among the
// occurrences of that suffix it takes the most recent one, and drafts the
// tokens that followed it. The copy may run past the end of the history into
// the tokens it is drafting (as LZ77 copies overlap): after "a b c a b" the
// suffix "a b" matches at 0 and gamma 4 drafts "c a b c", continuing the
// period. No earlier occurrence of even the min_n-gram: it drafts nothing,
// which the contract allows (the target then decodes one token).
//
// Drafts are deterministic: prob 1 and an empty support (one-hot), whatever
// the sampling params (the target's rejection sampler then accepts a draft
// with probability p(token), which keeps the target distribution exact).
// Params are therefore optional, but validated when given.
//
// Cost: appending a token updates one hash chain per n (O(max_n) hashing);
// a lookup walks one chain per n, skipping only hash collisions; Release
// undoes appends in reverse order, so rollback costs O(dropped tokens × the
// number of n). Memory per sequence: the history plus one int per token and n.
//
// Thread-safety: none; one caller at a time (the service's mutex, or the
// coordinator's scheduler thread).
#ifndef TANDEM_DRAFT_NGRAM_PROPOSER_H_
#define TANDEM_DRAFT_NGRAM_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "draft/api/proposer.h"

namespace tandem::draft {

// Longest n-gram NgramProposerConfig::max_n may ask for.
inline constexpr int32_t kMaxNgram = 32;
// Defaults for a draft worker without a model to read them from.
inline constexpr int32_t kDefaultNgramContextLength = 1 << 17;
inline constexpr int32_t kDefaultNgramMaxSequences = 4096;

struct NgramProposerConfig {
  int32_t vocab_size = 0;  // the target's; token ids must be in [0, vocab_size)
  // Longest history a sequence may reach (the target's context length).
  int32_t context_length = kDefaultNgramContextLength;
  // Sequences held at once; a Propose of one more is ResourceExhausted.
  int32_t max_sequences = kDefaultNgramMaxSequences;
  // Suffix lengths tried, longest first: 1 <= min_n <= max_n <= kMaxNgram.
  int32_t min_n = 1;
  int32_t max_n = 4;
};

// InvalidArgument naming the field, its value and the limit.
absl::Status ValidateNgramProposerConfig(const NgramProposerConfig& config);

class NgramProposer final : public Proposer {
 public:
  // InvalidArgument for a bad config (ValidateNgramProposerConfig).
  static absl::StatusOr<std::unique_ptr<NgramProposer>> Create(const NgramProposerConfig& config);

  NgramProposer(const NgramProposer&) = delete;
  NgramProposer& operator=(const NgramProposer&) = delete;

  const ProposerInfo& info() const override { return info_; }
  // See proposer.h. Every failure is found by validation, before any change
  // (ResourceExhausted names the sequences held and max_sequences).
  absl::StatusOr<std::vector<std::vector<DraftToken>>> ProposeBatch(
      std::span<const ProposeInput> inputs) override;
  absl::Status Release(SeqId seq, int32_t keep_length) override;
  int32_t Length(SeqId seq) const override;
  int32_t num_sequences() const override { return static_cast<int32_t>(seqs_.size()); }
  const ProposeStats& last_stats() const override { return last_stats_; }

 private:
  // One sequence's history and its n-gram index. For each n (index n - min_n):
  // last[hash] = the end position e (exclusive) of the most recent n-gram
  // tokens[e - n, e) with that hash and a follower (e < tokens.size()), and
  // prev[e] the end of the previous n-gram with the same hash (-1: none) —
  // hash chains, so Release can pop appends in reverse order.
  struct NgramIndex {
    absl::flat_hash_map<uint64_t, int32_t> last;
    std::vector<int32_t> prev;  // [tokens.size()], -1 where no n-gram ends
  };
  struct Sequence {
    std::vector<int32_t> tokens;
    std::vector<NgramIndex> index;  // [max_n - min_n + 1]
  };

  explicit NgramProposer(const NgramProposerConfig& config);
  absl::Status Validate(std::span<const ProposeInput> inputs) const;
  void Append(Sequence& s, int32_t token) const;
  void Truncate(Sequence& s, int32_t length) const;
  // The end e < tokens.size() of the most recent earlier occurrence of the
  // longest matching suffix, or -1.
  int32_t FindMatch(const Sequence& s) const;

  const NgramProposerConfig config_;
  const ProposerInfo info_;
  absl::flat_hash_map<SeqId, Sequence> seqs_;
  ProposeStats last_stats_;
};

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_NGRAM_PROPOSER_H_
