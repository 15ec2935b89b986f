// SpeculativeVerifier against the Sampler run one position at a time: greedy
// verification of random drafts equals sequential greedy sampling (accepted
// prefix, correction, bonus, logprobs); a draft that is the target's own
// sample is always accepted; penalties and min_tokens see the accepted
// drafts; degenerate rows and malformed q fall back without crashing; and
// ValidateDraftProbs names what is wrong. The distribution of the emitted
// tokens is tested in speculative_distribution_test.cc.
#include "engine/sampling/speculative_verifier.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "engine/sampling/candidate_list.h"
#include "engine/sampling/row_sampler.h"
#include "engine/sampling/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Field-by-field equality of two results (token, logprob, top logprobs).
void ExpectSameResult(const SampleResult& got, const SampleResult& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.logprob, want.logprob);
  ASSERT_EQ(got.top_logprobs.size(), want.top_logprobs.size());
  for (size_t j = 0; j < want.top_logprobs.size(); ++j) {
    EXPECT_EQ(got.top_logprobs[j].token, want.top_logprobs[j].token);
    EXPECT_EQ(got.top_logprobs[j].logprob, want.top_logprobs[j].logprob);
  }
}

// One sequence's verification problem: g draft tokens, logits for g+1
// positions, and the history before them.
struct Case {
  int32_t vocab = 0;
  SamplingParams params;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<int32_t> eos;
  uint64_t seed = 0;
  uint64_t stream = 0;
  std::vector<float> logits;  // [(g + 1) * vocab]
  std::vector<int32_t> drafts;
  std::vector<DraftProbs> probs;

  // The Sampler's row at position i (0-based) with `history` as output.
  SamplingRow RowAt(size_t i, const std::vector<int32_t>& history) const {
    return SamplingRow{.logits = logits.data() + i * static_cast<size_t>(vocab),
                       .params = &params,
                       .prompt_tokens = prompt,
                       .output_tokens = history,
                       .seed = seed,
                       .stream = stream,
                       .eos_token_ids = eos};
  }

  VerifyRow Row() const {
    return VerifyRow{.target = RowAt(0, output), .draft_tokens = drafts, .draft_probs = probs};
  }
};

SampleResult SampleOne(Sampler& sampler, const SamplingRow& row) {
  SampleResult result;
  sampler.SampleBatch(std::span<const SamplingRow>(&row, 1), std::span<SampleResult>(&result, 1),
                      nullptr);
  return result;
}

VerifyResult VerifyOne(SpeculativeVerifier& verifier, const Case& c) {
  VerifyRow row = c.Row();
  VerifyResult result;
  verifier.VerifyBatch(std::span<const VerifyRow>(&row, 1), std::span<VerifyResult>(&result, 1),
                       nullptr);
  return result;
}

// Checks `got` against the Sampler run position by position: the drafts
// before `num_accepted` are the tokens it would have chosen, and `next` is
// its choice at position num_accepted (history = output + accepted drafts).
void ExpectSequential(Sampler& sampler, const Case& c, const VerifyResult& got,
                      size_t num_accepted, const std::string& where) {
  ASSERT_EQ(got.accepted.size(), num_accepted) << where;
  std::vector<int32_t> history = c.output;
  for (size_t i = 0; i < num_accepted; ++i) {
    SampleResult want = SampleOne(sampler, c.RowAt(i, history));
    ASSERT_EQ(want.token, c.drafts[i]) << where << ": accepted draft " << i;
    ExpectSameResult(got.accepted[i], want, where + " accepted " + std::to_string(i));
    history.push_back(c.drafts[i]);
  }
  ExpectSameResult(got.next, SampleOne(sampler, c.RowAt(num_accepted, history)), where + " next");
}

// Greedy targets, random drafts that follow the target's greedy choice with
// probability 3/4 per position: the verifier accepts exactly the prefix of
// drafts that sequential greedy sampling reproduces, then emits its next
// choice. Integer-valued logits make ties (lowest id wins) common;
// penalties and min_tokens make every position depend on the drafts before.
TEST(SpeculativeVerifierTest, GreedyEqualsSequentialSampling) {
  constexpr int32_t kVocab = 40;
  std::mt19937 rng(20240612);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Sampler sampler(kVocab);
  SpeculativeVerifier verifier(kVocab);
  int num_all_accepted = 0, num_rejected = 0, num_rejected_first = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Case c;
    c.vocab = kVocab;
    c.params.temperature = trial % 7 == 0 ? 1e-6f : 0.0f;
    c.params.repetition_penalty = uniform(0, 1) ? 1.5f : 1.0f;
    c.params.frequency_penalty = uniform(0, 1) ? 0.7f : 0.0f;
    c.params.presence_penalty = uniform(0, 1) ? 0.4f : 0.0f;
    c.params.min_tokens = uniform(0, 5);
    c.params.stop_token_ids = {3};
    c.params.logprobs = uniform(0, 4);
    c.eos = {kVocab - 1};
    for (int i = uniform(1, 6); i > 0; --i) c.prompt.push_back(uniform(0, kVocab - 1));
    for (int i = uniform(0, 4); i > 0; --i) c.output.push_back(uniform(0, kVocab - 1));
    const int g = uniform(1, 6);
    for (int i = 0; i < (g + 1) * kVocab; ++i) {
      c.logits.push_back(static_cast<float>(uniform(-4, 4)));
    }
    // EOS and the stop id are often the best token: min_tokens masks them.
    for (int i = 0; i <= g; ++i) {
      if (uniform(0, 2) == 0) c.logits[i * kVocab + kVocab - 1] = 6.0f;
      if (uniform(0, 3) == 0) c.logits[i * kVocab + 3] = 6.5f;
    }
    std::vector<int32_t> history = c.output;
    size_t num_accepted = static_cast<size_t>(g);
    for (int i = 0; i < g; ++i) {
      const int32_t truth = SampleOne(sampler, c.RowAt(i, history)).token;
      const int32_t draft = uniform(0, 3) > 0 ? truth : uniform(0, kVocab - 1);
      if (draft != truth && num_accepted == static_cast<size_t>(g)) num_accepted = i;
      c.drafts.push_back(draft);
      c.probs.push_back({});  // a greedy draft: one-hot q
      history.push_back(draft);
    }
    const VerifyResult got = VerifyOne(verifier, c);
    ExpectSequential(sampler, c, got, num_accepted, "trial " + std::to_string(trial));
    if (::testing::Test::HasFailure()) return;
    num_all_accepted += num_accepted == static_cast<size_t>(g);
    num_rejected += num_accepted < static_cast<size_t>(g);
    num_rejected_first += num_accepted == 0;
  }
  // Every path was taken many times.
  EXPECT_GT(num_all_accepted, 50);
  EXPECT_GT(num_rejected, 150);
  EXPECT_GT(num_rejected_first, 30);
}

// The target's processed distribution at a row, as a draft would send it.
DraftProbs ProcessedQ(const SamplingRow& row, int32_t vocab, int32_t token) {
  RowSampler sampler(vocab);
  const CandidateList* candidates = sampler.ProcessedCandidates(row);
  DraftProbs q;
  q.prob = 0.0f;
  for (const Candidate& c : candidates->items()) {
    const float p = static_cast<float>(c.value / candidates->Sum());
    q.support_tokens.push_back(c.token);
    q.support_probs.push_back(p);
    if (c.token == token) q.prob = p;
  }
  return q;
}

// A draft that is the target itself (same params, seed and stream, so it
// draws exactly the Sampler's tokens, with q = p) is always accepted, and
// the bonus is the Sampler's next draw: speculation changes nothing.
TEST(SpeculativeVerifierTest, TargetAsItsOwnDraftIsAlwaysAccepted) {
  constexpr int32_t kVocab = 50;
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Sampler sampler(kVocab);
  SpeculativeVerifier verifier(kVocab);
  for (int trial = 0; trial < 200; ++trial) {
    Case c;
    c.vocab = kVocab;
    c.params.temperature = 0.8f + 0.1f * static_cast<float>(trial % 5);
    c.params.top_k = trial % 3 == 0 ? 0 : 20;
    c.params.top_p = trial % 4 == 0 ? 1.0f : 0.9f;
    c.params.min_p = trial % 5 == 0 ? 0.02f : 0.0f;
    c.params.repetition_penalty = 1.2f;
    c.params.frequency_penalty = 0.3f;
    c.params.logprobs = 2;
    c.prompt = {1, 2, 3};
    c.output = {4, 5};
    c.seed = 1000 + static_cast<uint64_t>(trial);
    c.stream = static_cast<uint64_t>(trial % 3);
    const int g = 1 + trial % 5;
    for (int i = 0; i < (g + 1) * kVocab; ++i) c.logits.push_back(normal(rng));
    std::vector<int32_t> history = c.output;
    for (int i = 0; i < g; ++i) {
      const SamplingRow row = c.RowAt(i, history);
      const int32_t token = SampleOne(sampler, row).token;
      c.drafts.push_back(token);
      c.probs.push_back(ProcessedQ(row, kVocab, token));
      history.push_back(token);
    }
    const VerifyResult got = VerifyOne(verifier, c);
    ExpectSequential(sampler, c, got, static_cast<size_t>(g), "trial " + std::to_string(trial));
    if (::testing::Test::HasFailure()) return;
  }
}

// Greedy, repetition penalty: at position 2 the raw best token is the one
// accepted at position 1, which the penalty (counting the accepted draft)
// pushes below the runner-up. A verifier that ignored the accepted drafts
// would accept the repeated token.
TEST(SpeculativeVerifierTest, PenaltiesCountAcceptedDrafts) {
  Sampler sampler(4);
  SpeculativeVerifier verifier(4);
  for (int variant = 0; variant < 3; ++variant) {
    Case c;
    c.vocab = 4;
    c.params.temperature = 0.0f;
    if (variant == 0) c.params.repetition_penalty = 2.0f;
    if (variant == 1) c.params.frequency_penalty = 1.0f;
    if (variant == 2) c.params.presence_penalty = 1.0f;
    c.output = {0};
    c.logits = {0.0f, 3.0f, 0.0f, 0.0f,    // position 1: token 1
                0.0f, 2.0f, 1.5f, 0.0f,    // position 2: 1 unless penalized, then 2
                0.0f, 0.0f, 0.0f, 1.0f};   // bonus: 3
    c.drafts = {1, 1};
    c.probs = {{}, {}};
    const VerifyResult got = VerifyOne(verifier, c);
    ASSERT_EQ(got.accepted.size(), 1u) << "variant " << variant;
    EXPECT_EQ(got.accepted[0].token, 1);
    EXPECT_EQ(got.next.token, 2) << "variant " << variant;
    ExpectSequential(sampler, c, got, 1, "variant " + std::to_string(variant));
  }
}

// min_tokens: with one token generated and min_tokens 2, EOS is masked at
// position 1 but not at position 2 — the accepted draft reaches min_tokens.
TEST(SpeculativeVerifierTest, MinTokensCountsAcceptedDrafts) {
  Sampler sampler(4);
  SpeculativeVerifier verifier(4);
  Case c;
  c.vocab = 4;
  c.params.temperature = 0.0f;
  c.params.min_tokens = 2;
  c.eos = {3};
  c.output = {0};
  c.logits = {0.0f, 1.0f, 0.0f, 5.0f,   // EOS masked: token 1
              0.0f, 1.0f, 0.0f, 5.0f,   // EOS allowed now
              0.0f, 0.0f, 1.0f, 0.0f};
  c.drafts = {1, 3};
  c.probs = {{}, {}};
  VerifyResult got = VerifyOne(verifier, c);
  ASSERT_EQ(got.accepted.size(), 2u);
  EXPECT_EQ(got.accepted[1].token, 3);
  EXPECT_EQ(got.next.token, 2);  // bonus
  ExpectSequential(sampler, c, got, 2, "eos");

  // A draft of EOS at position 1 is rejected: it is masked there.
  c.drafts = {3, 3};
  got = VerifyOne(verifier, c);
  EXPECT_TRUE(got.accepted.empty());
  EXPECT_EQ(got.next.token, 1);
}

// Without drafts a row is exactly a Sampler row; batches on a pool give the
// same results as one row at a time.
TEST(SpeculativeVerifierTest, NoDraftsAndPoolMatchSampler) {
  constexpr int32_t kVocab = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  Sampler sampler(kVocab);
  SpeculativeVerifier verifier(kVocab);
  std::vector<Case> cases(40);
  for (size_t k = 0; k < cases.size(); ++k) {
    Case& c = cases[k];
    c.vocab = kVocab;
    c.params.temperature = k % 4 == 0 ? 0.0f : 1.1f;
    c.params.top_p = 0.9f;
    c.params.logprobs = 3;
    c.output = {7, 8, 9};
    c.seed = k;
    const int g = static_cast<int>(k % 4);
    for (int i = 0; i < (g + 1) * kVocab; ++i) c.logits.push_back(normal(rng));
    for (int i = 0; i < g; ++i) {
      c.drafts.push_back(static_cast<int32_t>((k * 7 + static_cast<size_t>(i)) % kVocab));
      c.probs.push_back({});
    }
  }
  std::vector<VerifyRow> rows;
  for (const Case& c : cases) rows.push_back(c.Row());
  std::vector<VerifyResult> pooled(rows.size());
  ThreadPool pool(3);
  verifier.VerifyBatch(rows, pooled, &pool);
  for (size_t k = 0; k < cases.size(); ++k) {
    const VerifyResult alone = VerifyOne(verifier, cases[k]);
    ASSERT_EQ(pooled[k].accepted.size(), alone.accepted.size()) << "case " << k;
    for (size_t i = 0; i < alone.accepted.size(); ++i) {
      ExpectSameResult(pooled[k].accepted[i], alone.accepted[i], "case " + std::to_string(k));
    }
    ExpectSameResult(pooled[k].next, alone.next, "case " + std::to_string(k));
    if (cases[k].drafts.empty()) {
      EXPECT_TRUE(alone.accepted.empty());
      ExpectSameResult(alone.next, SampleOne(sampler, cases[k].RowAt(0, cases[k].output)),
                       "no drafts, case " + std::to_string(k));
    }
  }
}

// A sampled target never accepts a draft its truncation removed (p(d) = 0),
// and the correction is never that draft.
TEST(SpeculativeVerifierTest, TruncatedDraftIsAlwaysRejected) {
  constexpr int32_t kVocab = 10;
  SpeculativeVerifier verifier(kVocab);
  Case c;
  c.vocab = kVocab;
  c.params.top_k = 3;
  c.logits = {5, 4, 3, 2, 1, 0, 0, 0, 0, 0, /* bonus row */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  c.drafts = {6};
  c.probs = {{}};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    c.seed = seed;
    const VerifyResult got = VerifyOne(verifier, c);
    EXPECT_TRUE(got.accepted.empty());
    EXPECT_GE(got.next.token, 0);
    EXPECT_LT(got.next.token, 3) << "seed " << seed;
  }
}

// Degenerate inputs take the documented fallbacks instead of crashing.
TEST(SpeculativeVerifierTest, DegenerateRowsFallBackToTheSampler) {
  constexpr int32_t kVocab = 6;
  Sampler sampler(kVocab);
  SpeculativeVerifier verifier(kVocab);

  // Nothing survives processing (every logit -inf, or NaN): p is one-hot at
  // the Sampler's raw-argmax fallback, token 0.
  for (float bad : {-kInf, std::numeric_limits<float>::quiet_NaN()}) {
    Case c;
    c.vocab = kVocab;
    c.logits.assign(3 * kVocab, bad);
    c.drafts = {0, 4};
    c.probs = {{}, {}};
    const VerifyResult got = VerifyOne(verifier, c);
    ASSERT_EQ(got.accepted.size(), 1u);
    EXPECT_EQ(got.accepted[0].token, 0);
    EXPECT_EQ(got.next.token, 0);
  }

  // A q that is not a distribution (every support probability 1): after a
  // rejection max(0, p - q) has no mass, and the position is sampled as the
  // Sampler would.
  Case c;
  c.vocab = kVocab;
  c.logits = {1, 2, 3, 0, 0, 0, /* bonus row */ 0, 0, 0, 0, 0, 0};
  c.drafts = {2};
  c.probs = {{.prob = 1.0f, .support_tokens = {0, 1, 2, 3, 4, 5},
              .support_probs = {1, 1, 1, 1, 1, 1}}};
  int rejected = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    c.seed = seed;
    const VerifyResult got = VerifyOne(verifier, c);
    if (!got.accepted.empty()) continue;
    ++rejected;
    ExpectSameResult(got.next, SampleOne(sampler, c.RowAt(0, c.output)),
                     "seed " + std::to_string(seed));
  }
  EXPECT_GT(rejected, 50);

  // NaN probabilities (rejected by ValidateDraftProbs upstream) still give
  // a token in range.
  c.probs = {{.prob = std::numeric_limits<float>::quiet_NaN(),
              .support_tokens = {2, 4},
              .support_probs = {std::numeric_limits<float>::quiet_NaN(), 0.5f}}};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    c.seed = seed;
    const VerifyResult got = VerifyOne(verifier, c);
    EXPECT_GE(got.next.token, 0);
    EXPECT_LT(got.next.token, kVocab);
  }
}

TEST(ValidateDraftProbsTest, AcceptsWellFormedQ) {
  EXPECT_TRUE(ValidateDraftProbs(3, {}, 10).ok());
  EXPECT_TRUE(ValidateDraftProbs(3, {.prob = 0.25f, .support_tokens = {3, 7, 1},
                                     .support_probs = {0.25f, 0.75f, 0.0f}},
                                 10)
                  .ok());
}

DraftProbs WithProb(float prob) {
  DraftProbs q;
  q.prob = prob;
  return q;
}

TEST(ValidateDraftProbsTest, NamesTheValueAndTheLimit) {
  auto message = [](int32_t token, const DraftProbs& q) {
    absl::Status s = ValidateDraftProbs(token, q, 10);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(message(10, {}), HasSubstr("draft token 10 is out of range"));
  EXPECT_THAT(message(-1, {}), HasSubstr("[0, 10)"));
  EXPECT_THAT(message(2, WithProb(0.0f)), HasSubstr("prob 0 of draft token 2"));
  EXPECT_THAT(message(2, WithProb(1.5f)), HasSubstr("(0, 1]"));
  EXPECT_THAT(message(2, WithProb(std::numeric_limits<float>::quiet_NaN())),
              HasSubstr("prob nan"));
  EXPECT_THAT(message(2, WithProb(0.5f)), HasSubstr("empty support"));
  EXPECT_THAT(message(2, {.prob = 0.5f, .support_tokens = {2, 3}, .support_probs = {0.5f}}),
              HasSubstr("support_tokens has 2 entries but support_probs 1"));
  EXPECT_THAT(message(2, {.prob = 0.5f, .support_tokens = {2, 12}, .support_probs = {0.5f, 0.5f}}),
              HasSubstr("support_tokens[1] = 12 is out of range"));
  EXPECT_THAT(message(2, {.prob = 0.5f, .support_tokens = {2, 3}, .support_probs = {0.5f, -0.1f}}),
              HasSubstr("support_probs[1] = -0.1 is out of range: must be in [0, 1]"));
  EXPECT_THAT(message(2, {.prob = 0.5f, .support_tokens = {4, 3}, .support_probs = {0.5f, 0.5f}}),
              HasSubstr("draft token 2 is not in its support of 2 tokens"));
}

}  // namespace
}  // namespace tandem::sampling
