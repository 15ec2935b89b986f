#include "engine/sampling/speculative_verifier.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "engine/sampling/candidate_list.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/row_sampler.h"

namespace tandem::sampling {
namespace {

// p(token) under the processed distribution `candidates` (0 when the token
// was cut by truncation or masking).
double ProbabilityOf(const CandidateList& candidates, int32_t token) {
  for (const Candidate& c : candidates.items()) {
    if (c.token == token) return static_cast<double>(c.value) / candidates.Sum();
  }
  return 0.0;
}

}  // namespace

absl::Status ValidateDraftProbs(int32_t token, const DraftProbs& probs, int32_t vocab_size) {
  if (token < 0 || token >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft token %d is out of range: token ids must be in [0, %d)", token, vocab_size));
  }
  // Written so that NaN fails every range check.
  if (!(probs.prob > 0.0f && probs.prob <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prob %g of draft token %d is out of range: must be in (0, 1]", probs.prob, token));
  }
  if (probs.support_tokens.size() != probs.support_probs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "support_tokens has %d entries but support_probs %d: they must pair one to one",
        probs.support_tokens.size(), probs.support_probs.size()));
  }
  if (probs.support_tokens.empty()) {
    if (probs.prob != 1.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prob %g of draft token %d with an empty support: an empty support means q is "
          "one-hot, so prob must be 1",
          probs.prob, token));
    }
    return absl::OkStatus();
  }
  bool found = false;
  for (size_t j = 0; j < probs.support_tokens.size(); ++j) {
    const int32_t t = probs.support_tokens[j];
    const float q = probs.support_probs[j];
    if (t < 0 || t >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "support_tokens[%d] = %d is out of range: token ids must be in [0, %d)", j, t,
          vocab_size));
    }
    if (!(q >= 0.0f && q <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "support_probs[%d] = %g is out of range: must be in [0, 1]", j, q));
    }
    found = found || t == token;
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft token %d is not in its support of %d tokens: the draft must have drawn it from "
        "that distribution",
        token, probs.support_tokens.size()));
  }
  return absl::OkStatus();
}

struct SpeculativeVerifier::Worker {
  explicit Worker(int32_t vocab_size)
      : sampler(vocab_size),
        q(static_cast<size_t>(vocab_size), 0.0f),
        residual(static_cast<size_t>(vocab_size), 0.0) {}

  RowSampler sampler;
  std::vector<int32_t> history;  // output tokens + the drafts accepted so far
  std::vector<float> q;          // [vocab_size] dense q, all zero between uses
  std::vector<double> residual;  // [vocab_size] max(0, p - q), all zero between uses
};

SpeculativeVerifier::SpeculativeVerifier(int32_t vocab_size) : vocab_size_(vocab_size) {
  CHECK(vocab_size >= 1, "vocab_size %d must be >= 1", vocab_size);
}

SpeculativeVerifier::~SpeculativeVerifier() = default;

void SpeculativeVerifier::VerifyBatch(std::span<const VerifyRow> rows,
                                      std::span<VerifyResult> results, ThreadPool* pool) {
  CHECK(rows.size() == results.size(), "%zu rows but %zu results", rows.size(), results.size());
  if (rows.empty()) return;
  const size_t num_threads = pool != nullptr ? static_cast<size_t>(pool->num_threads()) : 1;
  while (workers_.size() < num_threads) workers_.push_back(std::make_unique<Worker>(vocab_size_));
  auto run = [&](int thread_index, int64_t begin, int64_t end) {
    Worker* worker = workers_[static_cast<size_t>(thread_index)].get();
    for (int64_t i = begin; i < end; ++i) {
      VerifyRowOn(rows[static_cast<size_t>(i)], &results[static_cast<size_t>(i)], worker);
    }
  };
  if (pool == nullptr) {
    run(0, 0, static_cast<int64_t>(rows.size()));
  } else {
    pool->ParallelFor(static_cast<int64_t>(rows.size()), /*min_chunk=*/1, run);
  }
}

void SpeculativeVerifier::VerifyRowOn(const VerifyRow& row, VerifyResult* result,
                                      Worker* worker) const {
  const SamplingRow& target = row.target;
  CHECK(target.logits != nullptr, "verify row without logits");
  CHECK(target.params != nullptr, "verify row without params");
  const SamplingParams& p = *target.params;
  CHECK(p.beam_candidates == 0, "beam rows (beam_candidates %d) cannot verify drafts",
        p.beam_candidates);
  CHECK(row.draft_probs.size() == row.draft_tokens.size(), "%zu draft tokens but %zu draft_probs",
        row.draft_tokens.size(), row.draft_probs.size());
  const size_t vocab = static_cast<size_t>(vocab_size_);
  std::vector<int32_t>& history = worker->history;
  history.assign(target.output_tokens.begin(), target.output_tokens.end());
  result->accepted.clear();

  SamplingRow at = target;
  for (size_t i = 0; i < row.draft_tokens.size(); ++i) {
    const int32_t d = row.draft_tokens[i];
    CHECK(d >= 0 && d < vocab_size_, "draft token %d is out of range [0, %d)", d, vocab_size_);
    at.logits = target.logits + i * vocab;
    at.output_tokens = history;
    SampleResult emitted;
    VerifyAt(at, d, row.draft_probs[i], &emitted, worker);
    if (!emitted.draft_accepted) {
      result->next = std::move(emitted);
      return;
    }
    result->accepted.push_back(std::move(emitted));
    history.push_back(d);
  }
  at.logits = target.logits + row.draft_tokens.size() * vocab;
  at.output_tokens = history;
  worker->sampler.Sample(at, &result->next);
}

void SpeculativeVerifier::VerifyPosition(const SamplingRow& row, SampleResult* result) {
  CHECK(row.logits != nullptr && row.params != nullptr && row.draft_probs != nullptr,
        "verify position without logits, params or draft_probs");
  CHECK(row.params->beam_candidates == 0, "beam rows (beam_candidates %d) cannot verify drafts",
        row.params->beam_candidates);
  CHECK(row.draft_token >= 0 && row.draft_token < vocab_size_,
        "draft token %d is out of range [0, %d)", row.draft_token, vocab_size_);
  if (workers_.empty()) workers_.push_back(std::make_unique<Worker>(vocab_size_));
  SamplingRow at = row;
  at.draft_token = -1;
  at.draft_probs = nullptr;
  *result = {};
  VerifyAt(at, row.draft_token, *row.draft_probs, result, workers_[0].get());
}

void SpeculativeVerifier::VerifyAt(const SamplingRow& at, int32_t d, const DraftProbs& q,
                                   SampleResult* emitted, Worker* worker) const {
  // Both the greedy choice and a row with no candidate left are
  // deterministic (p is one-hot at the Sampler's token): accept iff the
  // draft is that token, else that token is the correction.
  const bool greedy = at.params->temperature < kGreedyTemperature;
  const CandidateList* candidates = greedy ? nullptr : worker->sampler.ProcessedCandidates(at);
  if (candidates == nullptr) {
    worker->sampler.Sample(at, emitted);
    emitted->draft_accepted = emitted->token == d;
    return;
  }
  const double q_d = q.support_tokens.empty() ? 1.0 : static_cast<double>(q.prob);
  const double p_d = ProbabilityOf(*candidates, d);
  const uint64_t step = at.output_tokens.size();
  const double u = UniformDraw(at.seed, at.stream, step, DrawPurpose::kSpeculativeAccept);
  // u < p/q without the division: q_d > 0 for validated input, and a NaN
  // makes the comparison false (a rejection, then the fallback).
  emitted->draft_accepted = u * q_d < p_d;
  if (emitted->draft_accepted) {
    emitted->token = d;
    worker->sampler.ComputeLogprobs(at, emitted);
    return;
  }
  emitted->token = DrawResidual(
      *candidates, d, q, UniformDraw(at.seed, at.stream, step, DrawPurpose::kSpeculativeResidual),
      worker);
  if (emitted->token >= 0) {
    worker->sampler.ComputeLogprobs(at, emitted);
  } else {
    // No residual mass: p <= q everywhere, which for true distributions
    // means p == q (then the rejection was rounding) or a NaN. Sampling p
    // itself is the answer p == q calls for.
    worker->sampler.Sample(at, emitted);
  }
}

int32_t SpeculativeVerifier::DrawResidual(const CandidateList& candidates, int32_t token,
                                          const DraftProbs& probs, double u,
                                          Worker* worker) const {
  std::vector<float>& q = worker->q;
  for (size_t j = 0; j < probs.support_tokens.size(); ++j) {
    const int32_t t = probs.support_tokens[j];
    CHECK(t >= 0 && t < vocab_size_, "support token %d is out of range [0, %d)", t, vocab_size_);
    q[static_cast<size_t>(t)] = probs.support_probs[j];
  }
  // q(d) is `prob` (1 for a one-hot q), whatever the support says at d.
  q[static_cast<size_t>(token)] = probs.support_tokens.empty() ? 1.0f : probs.prob;
  // r = max(0, p - q) over the candidates (p is 0 elsewhere), scattered by
  // token: the draw walks token ids in ascending order, so it is a function
  // of the two distributions alone, not of the order truncation left the
  // candidates in. O(vocab), like the logprobs every emitted token needs.
  const double total = candidates.Sum();
  std::vector<double>& residual = worker->residual;
  for (const Candidate& c : candidates.items()) {
    const double r = static_cast<double>(c.value) / total - static_cast<double>(q[c.token]);
    if (r > 0.0) residual[static_cast<size_t>(c.token)] = r;  // false for NaN
  }
  for (int32_t t : probs.support_tokens) q[static_cast<size_t>(t)] = 0.0f;
  q[static_cast<size_t>(token)] = 0.0f;
  double mass = 0.0;
  for (double r : residual) mass += r;
  int32_t drawn = -1;
  if (mass > 0.0 && std::isfinite(mass)) {
    const double target = u * mass;
    double running = 0.0;
    for (size_t t = 0; t < residual.size(); ++t) {
      if (residual[t] <= 0.0) continue;
      drawn = static_cast<int32_t>(t);  // rounding may leave the walk short: the last one
      running += residual[t];
      if (running > target) break;
    }
  }
  for (const Candidate& c : candidates.items()) residual[static_cast<size_t>(c.token)] = 0.0;
  return drawn;
}

}  // namespace tandem::sampling
