// NgramProposer: prompt lookup on crafted sequences (longest suffix wins, then
// the most recent occurrence; overlapping copies; no match drafts nothing),
// the sequence contract's lengths and rollback, validation, capacity, and a
// randomized comparison with a brute-force search over appends and rollbacks.
#include "draft/ngram_proposer.h"

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::draft {
namespace {

constexpr int32_t kVocab = 100;

std::unique_ptr<NgramProposer> Make(int32_t min_n = 1, int32_t max_n = 4,
                                    int32_t max_sequences = 16, int32_t context = 1 << 16) {
  NgramProposerConfig config;
  config.vocab_size = kVocab;
  config.min_n = min_n;
  config.max_n = max_n;
  config.max_sequences = max_sequences;
  config.context_length = context;
  auto proposer = NgramProposer::Create(config);
  EXPECT_TRUE(proposer.ok()) << proposer.status();
  return proposer.ok() ? std::move(*proposer) : nullptr;
}

std::vector<int32_t> Ids(const std::vector<DraftToken>& tokens) {
  std::vector<int32_t> ids;
  for (const DraftToken& t : tokens) ids.push_back(t.token);
  return ids;
}

std::vector<int32_t> ProposeIds(NgramProposer& p, int64_t seq, const std::vector<int32_t>& tokens,
                                int32_t start_pos, int32_t gamma) {
  auto drafted = p.Propose(SeqId(seq), tokens, start_pos, gamma, nullptr, 0, 0);
  EXPECT_TRUE(drafted.ok()) << drafted.status();
  if (!drafted.ok()) return {};
  for (const DraftToken& t : *drafted) {
    EXPECT_EQ(t.prob, 1.0f);
    EXPECT_TRUE(t.support_tokens.empty());
    EXPECT_TRUE(t.support_probs.empty());
  }
  return Ids(*drafted);
}

// The specification, by brute force: longest suffix n in [min_n, max_n] with
// an earlier occurrence ending before the end, most recent first; copy what
// followed, reading past the end from the copy itself.
std::vector<int32_t> Reference(const std::vector<int32_t>& h, int32_t min_n, int32_t max_n,
                               int32_t gamma) {
  const int32_t len = static_cast<int32_t>(h.size());
  for (int32_t n = max_n; n >= min_n; --n) {
    if (len < n + 1) continue;
    for (int32_t e = len - 1; e >= n; --e) {
      if (std::equal(h.begin() + e - n, h.begin() + e, h.end() - n)) {
        std::vector<int32_t> ext = h;
        for (int32_t k = 0; k < gamma; ++k) ext.push_back(ext[e + k]);
        return std::vector<int32_t>(ext.begin() + len, ext.end());
      }
    }
  }
  return {};
}

TEST(NgramProposerTest, CopiesWhatFollowedTheMatch) {
  auto p = Make();
  // "5 6 7 8 9 ... 5 6 7": the suffix 5 6 7 occurred at the start.
  EXPECT_EQ(ProposeIds(*p, 1, {5, 6, 7, 8, 9, 10, 11, 5, 6, 7}, 0, 3),
            (std::vector<int32_t>{8, 9, 10}));
  EXPECT_EQ(p->Length(SeqId(1)), 10 + 2);  // all drafts but the last are held
}

TEST(NgramProposerTest, LongestSuffixWinsOverMoreRecentShorterOne) {
  auto p = Make(1, 3);
  // Suffix "1 2 3": the 3-gram occurred at the start (followed by 40); the
  // 1-gram "3" occurred more recently (followed by 50).
  EXPECT_EQ(ProposeIds(*p, 1, {1, 2, 3, 40, 9, 3, 50, 1, 2, 3}, 0, 1),
            (std::vector<int32_t>{40}));
  // With max_n 1 only the last token is looked up: the most recent 3 wins.
  auto short_only = Make(1, 1);
  EXPECT_EQ(ProposeIds(*short_only, 1, {1, 2, 3, 40, 9, 3, 50, 1, 2, 3}, 0, 1),
            (std::vector<int32_t>{50}));
}

TEST(NgramProposerTest, MostRecentOccurrenceWins) {
  auto p = Make(2, 2);
  EXPECT_EQ(ProposeIds(*p, 1, {7, 8, 1, 7, 8, 2, 7, 8, 3, 7, 8}, 0, 1),
            (std::vector<int32_t>{3}));
}

TEST(NgramProposerTest, CopyOverlapsIntoItsOwnDrafts) {
  auto p = Make();
  // "a b c a b": the suffix "a b" matches at 0; the period continues.
  EXPECT_EQ(ProposeIds(*p, 1, {1, 2, 3, 1, 2}, 0, 5), (std::vector<int32_t>{3, 1, 2, 3, 1}));
  // A run of one token repeats it.
  EXPECT_EQ(ProposeIds(*p, 2, {4, 9, 9}, 0, 3), (std::vector<int32_t>{9, 9, 9}));
}

TEST(NgramProposerTest, NoMatchDraftsNothingAndKeepsTheTokens) {
  auto p = Make(2, 4);
  EXPECT_TRUE(ProposeIds(*p, 1, {1, 2, 3, 4, 5}, 0, 4).empty());
  EXPECT_EQ(p->Length(SeqId(1)), 5);
  // A single-token sequence has nothing earlier to match.
  EXPECT_TRUE(ProposeIds(*p, 2, {1}, 0, 4).empty());
  EXPECT_EQ(p->Length(SeqId(2)), 1);
  // Appending "1 2" makes the 2-gram "1 2" repeat: now it drafts.
  EXPECT_EQ(ProposeIds(*p, 1, {1, 2}, 5, 2), (std::vector<int32_t>{3, 4}));
}

TEST(NgramProposerTest, ReleaseRollsBackTheIndex) {
  auto p = Make(1, 2);
  const std::vector<int32_t> prompt = {10, 11, 12, 13, 10, 11};
  EXPECT_EQ(ProposeIds(*p, 1, prompt, 0, 3), (std::vector<int32_t>{12, 13, 10}));
  ASSERT_EQ(p->Length(SeqId(1)), 8);  // 10 11 12 13 10 11 12 13
  // The target accepted only "12" and corrected to 20: roll back to the
  // prompt plus the accepted draft, then send the correction.
  ASSERT_TRUE(p->Release(SeqId(1), 7).ok());
  EXPECT_EQ(p->Length(SeqId(1)), 7);
  // History 10 11 12 13 10 11 12 20: neither "12 20" nor "20" occurred.
  EXPECT_TRUE(ProposeIds(*p, 1, {20}, 7, 3).empty());
  ASSERT_TRUE(p->Release(SeqId(1), 2).ok());  // 10 11
  EXPECT_TRUE(ProposeIds(*p, 1, {12}, 2, 3).empty());
  // History 10 11 12 10: "10" matches only at 0. An index entry left over
  // from the dropped tokens (the 10 at 4) would point past the history.
  EXPECT_EQ(ProposeIds(*p, 1, {10}, 3, 2), (std::vector<int32_t>{11, 12}));
  ASSERT_TRUE(p->Release(SeqId(1), 0).ok());
  EXPECT_EQ(p->num_sequences(), 0);
  EXPECT_EQ(p->Length(SeqId(1)), 0);
}

TEST(NgramProposerTest, StopsAtTheContextLength) {
  auto p = Make(1, 4, 16, /*context=*/8);
  EXPECT_EQ(ProposeIds(*p, 1, {1, 2, 3, 1, 2, 3}, 0, 5), (std::vector<int32_t>{1, 2}));
  auto full = Make(1, 4, 16, /*context=*/6);
  EXPECT_TRUE(ProposeIds(*full, 1, {1, 2, 3, 1, 2, 3}, 0, 5).empty());
  EXPECT_EQ(full->Length(SeqId(1)), 6);
}

TEST(NgramProposerTest, BatchAnswersInInputOrder) {
  auto p = Make();
  const std::vector<int32_t> a = {1, 2, 1}, b = {3, 4, 5};
  const ProposeInput inputs[] = {{SeqId(7), a, 0, 2}, {SeqId(8), b, 0, 2}};
  auto out = p->ProposeBatch(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(Ids((*out)[0]), (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE((*out)[1].empty());
}

TEST(NgramProposerTest, InvalidInputsChangeNothing) {
  auto p = Make(1, 4, /*max_sequences=*/2);
  const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, kVocab};
  auto wrong_pos = p->Propose(SeqId(1), ok, 2, 1, nullptr, 0, 0);
  EXPECT_EQ(wrong_pos.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_pos.status().message().find("start_pos 2"), std::string::npos);
  auto out_of_range = p->Propose(SeqId(1), bad, 0, 1, nullptr, 0, 0);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find(std::to_string(kVocab)), std::string::npos);
  EXPECT_EQ(p->Propose(SeqId(1), ok, 0, 0, nullptr, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Propose(SeqId(1), {}, 0, 1, nullptr, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  sampling::SamplingParams bad_params;
  bad_params.temperature = -1;
  EXPECT_EQ(p->Propose(SeqId(1), ok, 0, 1, &bad_params, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A valid entry batched with an invalid one is not applied either.
  const ProposeInput mixed[] = {{SeqId(1), ok, 0, 1}, {SeqId(2), ok, 5, 1}};
  EXPECT_FALSE(p->ProposeBatch(mixed).ok());
  EXPECT_EQ(p->num_sequences(), 0);
  EXPECT_EQ(p->Release(SeqId(1), 1).code(), absl::StatusCode::kInvalidArgument);

  // Capacity: two sequences fit, a third is ResourceExhausted.
  ASSERT_TRUE(p->Propose(SeqId(1), ok, 0, 1, nullptr, 0, 0).ok());
  ASSERT_TRUE(p->Propose(SeqId(2), ok, 0, 1, nullptr, 0, 0).ok());
  auto full = p->Propose(SeqId(3), ok, 0, 1, nullptr, 0, 0);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("max_sequences 2"), std::string::npos) << full.status();
  EXPECT_EQ(p->Length(SeqId(3)), 0);
}

TEST(NgramProposerTest, BadConfigNamesTheValue) {
  NgramProposerConfig config;
  config.vocab_size = kVocab;
  config.min_n = 3;
  config.max_n = 2;
  auto bad = NgramProposer::Create(config);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("max_n 2"), std::string::npos) << bad.status();
  config.min_n = 1;
  config.max_n = kMaxNgram + 1;
  EXPECT_FALSE(NgramProposer::Create(config).ok());
  config.max_n = 4;
  config.vocab_size = 0;
  EXPECT_FALSE(NgramProposer::Create(config).ok());
}

// Random histories over a small vocabulary (many repeats), proposals and
// rollbacks as a coordinator would send them, each proposal checked against
// the brute-force specification.
TEST(NgramProposerTest, MatchesBruteForceOverProposalsAndRollbacks) {
  std::mt19937 rng(42);
  for (const auto& [min_n, max_n] : {std::pair{1, 4}, std::pair{2, 3}, std::pair{3, 6}}) {
    auto p = Make(min_n, max_n);
    std::vector<int32_t> history;  // what the proposer should hold
    std::uniform_int_distribution<int32_t> token(0, 5);
    std::vector<int32_t> pending = {token(rng), token(rng)};
    for (int round = 0; round < 400; ++round) {
      const int32_t gamma = 1 + static_cast<int32_t>(rng() % 6);
      std::vector<int32_t> expect_history = history;
      expect_history.insert(expect_history.end(), pending.begin(), pending.end());
      const std::vector<int32_t> expected = Reference(expect_history, min_n, max_n, gamma);
      const std::vector<int32_t> got =
          ProposeIds(*p, 1, pending, static_cast<int32_t>(history.size()), gamma);
      ASSERT_EQ(got, expected) << "round " << round;
      history = expect_history;
      for (size_t k = 0; k + 1 < got.size(); ++k) history.push_back(got[k]);
      ASSERT_EQ(p->Length(SeqId(1)), static_cast<int32_t>(history.size()));
      // Accept a random prefix of the drafts (held ones only), roll back,
      // and send a correction token next.
      const int32_t base = static_cast<int32_t>(history.size()) -
                           static_cast<int32_t>(got.empty() ? 0 : got.size() - 1);
      int32_t keep = base + static_cast<int32_t>(rng() % (got.empty() ? 1 : got.size()));
      if (rng() % 10 == 0) keep = static_cast<int32_t>(rng() % (history.size() + 1));
      ASSERT_TRUE(p->Release(SeqId(1), keep).ok());
      history.resize(static_cast<size_t>(keep));
      pending.assign(1 + rng() % 3, 0);
      for (int32_t& t : pending) t = token(rng);
    }
  }
}

// An 8k-token prompt and 200 rounds of proposing and rolling back stay fast.
TEST(NgramProposerTest, LongHistoriesAreCheap) {
  auto p = Make();
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(8192);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
  const auto start = std::chrono::steady_clock::now();
  auto first = p->Propose(SeqId(1), prompt, 0, 8, nullptr, 0, 0);
  ASSERT_TRUE(first.ok());
  int32_t length = p->Length(SeqId(1));
  for (int round = 0; round < 200; ++round) {
    const int32_t keep = length - static_cast<int32_t>(rng() % 4 == 0 ? 0 : 1);
    ASSERT_TRUE(p->Release(SeqId(1), keep).ok());
    const std::vector<int32_t> next = {static_cast<int32_t>(rng() % kVocab)};
    ASSERT_TRUE(p->Propose(SeqId(1), next, keep, 8, nullptr, 0, 0).ok());
    length = p->Length(SeqId(1));
  }
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, 2000.0) << "8k-token history took " << ms << " ms";
  EXPECT_GE(length, 8192);
}

}  // namespace
}  // namespace tandem::draft
