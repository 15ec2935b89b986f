#include "draft/ngram_proposer.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tandem::draft {
namespace {

// Hash of tokens[0, n): equal n-grams hash equally within a process. Only a
// lookup key — every candidate is compared token by token — so a collision
// costs a chain step, never a wrong draft.
uint64_t HashNgram(const int32_t* tokens, int32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(n + 1);
  for (int32_t i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    // splitmix64's finalizer: every input bit reaches every output bit.
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace

absl::Status ValidateNgramProposerConfig(const NgramProposerConfig& c) {
  if (c.vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("n-gram vocab_size %d (--vocab-size) is out of range: must be >= 1",
                        c.vocab_size));
  }
  if (c.context_length < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "n-gram context_length %d is out of range: must be >= 1", c.context_length));
  }
  if (c.max_sequences < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "n-gram max_sequences %d is out of range: must be >= 1", c.max_sequences));
  }
  if (c.min_n < 1 || c.min_n > kMaxNgram) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "n-gram min_n %d (--ngram-min) is out of range: must be in [1, %d]", c.min_n, kMaxNgram));
  }
  if (c.max_n < c.min_n || c.max_n > kMaxNgram) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "n-gram max_n %d (--ngram-max) is out of range: must be in [min_n %d, %d]", c.max_n,
        c.min_n, kMaxNgram));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NgramProposer>> NgramProposer::Create(
    const NgramProposerConfig& config) {
  if (absl::Status valid = ValidateNgramProposerConfig(config); !valid.ok()) return valid;
  return std::unique_ptr<NgramProposer>(new NgramProposer(config));
}

NgramProposer::NgramProposer(const NgramProposerConfig& config)
    : config_(config),
      info_{ProposerKind::kNgram, "ngram", config.vocab_size, config.context_length,
            config.max_sequences} {}

int32_t NgramProposer::Length(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : static_cast<int32_t>(it->second.tokens.size());
}

absl::Status NgramProposer::Validate(std::span<const ProposeInput> inputs) const {
  RETURN_IF_ERROR(ValidateProposeInputs(inputs, *this));
  int32_t num_new = 0;
  for (const ProposeInput& in : inputs) {
    if (!seqs_.contains(in.seq)) ++num_new;
  }
  const int64_t held = static_cast<int64_t>(seqs_.size());
  if (held + num_new > config_.max_sequences) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "n-gram draft is full: %d new sequences with %d held exceed max_sequences %d", num_new,
        held, config_.max_sequences));
  }
  return absl::OkStatus();
}

void NgramProposer::Append(Sequence& s, int32_t token) const {
  // The n-grams ending at p now have a follower (`token`): index them.
  const int32_t p = static_cast<int32_t>(s.tokens.size());
  for (int32_t n = config_.min_n; n <= config_.max_n; ++n) {
    NgramIndex& index = s.index[static_cast<size_t>(n - config_.min_n)];
    int32_t previous = -1;
    if (p >= n) {
      auto [it, inserted] = index.last.try_emplace(HashNgram(s.tokens.data() + p - n, n), p);
      if (!inserted) {
        previous = it->second;
        it->second = p;
      }
    }
    index.prev.push_back(previous);
  }
  s.tokens.push_back(token);
}

void NgramProposer::Truncate(Sequence& s, int32_t length) const {
  // Undo Append in reverse order: each chain's head is the entry to pop.
  for (int32_t p = static_cast<int32_t>(s.tokens.size()) - 1; p >= length; --p) {
    for (int32_t n = config_.min_n; n <= config_.max_n; ++n) {
      NgramIndex& index = s.index[static_cast<size_t>(n - config_.min_n)];
      const int32_t previous = index.prev.back();
      index.prev.pop_back();
      if (p < n) continue;
      auto it = index.last.find(HashNgram(s.tokens.data() + p - n, n));
      CHECK(it != index.last.end() && it->second == p);
      if (previous < 0) {
        index.last.erase(it);
      } else {
        it->second = previous;
      }
    }
    s.tokens.pop_back();
  }
}

int32_t NgramProposer::FindMatch(const Sequence& s) const {
  const int32_t len = static_cast<int32_t>(s.tokens.size());
  const int32_t* tokens = s.tokens.data();
  for (int32_t n = config_.max_n; n >= config_.min_n; --n) {
    if (len < n + 1) continue;  // no room for an earlier occurrence
    const int32_t* suffix = tokens + len - n;
    const NgramIndex& index = s.index[static_cast<size_t>(n - config_.min_n)];
    auto it = index.last.find(HashNgram(suffix, n));
    if (it == index.last.end()) continue;
    // Every indexed end is < len, so the suffix itself is never its own match.
    for (int32_t e = it->second; e >= 0; e = index.prev[static_cast<size_t>(e)]) {
      if (std::equal(tokens + e - n, tokens + e, suffix)) return e;
    }
  }
  return -1;
}

absl::StatusOr<std::vector<std::vector<DraftToken>>> NgramProposer::ProposeBatch(
    std::span<const ProposeInput> inputs) {
  if (absl::Status valid = Validate(inputs); !valid.ok()) return valid;
  const auto start = std::chrono::steady_clock::now();
  last_stats_ = ProposeStats{};
  std::vector<std::vector<DraftToken>> out(inputs.size());
  std::vector<int32_t> drafts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposeInput& in = inputs[i];
    auto [it, inserted] = seqs_.try_emplace(in.seq);
    Sequence& s = it->second;
    if (inserted) {
      s.index.resize(static_cast<size_t>(config_.max_n - config_.min_n + 1));
      for (NgramIndex& index : s.index) index.prev.reserve(in.new_tokens.size());
    }
    for (int32_t t : in.new_tokens) Append(s, t);
    const int32_t len = static_cast<int32_t>(s.tokens.size());
    const int32_t room = std::clamp(config_.context_length - len, 0, in.gamma);
    const int32_t match = room > 0 ? FindMatch(s) : -1;
    drafts.clear();
    // Copy what followed the match; past the history the copy reads its own
    // drafts, continuing a repeating period.
    for (int32_t k = 0; match >= 0 && k < room; ++k) {
      const int32_t src = match + k;
      drafts.push_back(src < len ? s.tokens[static_cast<size_t>(src)]
                                 : drafts[static_cast<size_t>(src - len)]);
    }
    // The contract keeps every draft but the last.
    for (size_t k = 0; k + 1 < drafts.size(); ++k) Append(s, drafts[k]);
    out[i].reserve(drafts.size());
    for (int32_t t : drafts) out[i].push_back(DraftToken{t, 1.0f, {}, {}});
  }
  last_stats_.sample_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

absl::Status NgramProposer::Release(SeqId seq, int32_t keep_length) {
  const int32_t length = Length(seq);
  if (keep_length < 0 || keep_length > length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: keep_length %d is out of range: must be in [0, %d] (the tokens the draft "
        "holds)",
        seq.value(), keep_length, length));
  }
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return absl::OkStatus();
  if (keep_length == 0) {
    seqs_.erase(it);
    return absl::OkStatus();
  }
  Truncate(it->second, keep_length);
  return absl::OkStatus();
}

}  // namespace tandem::draft
