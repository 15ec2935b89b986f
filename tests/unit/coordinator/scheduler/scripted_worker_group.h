// Test doubles for the scheduler without a model: ScriptedWorkerGroup, a
// WorkerGroup that behaves like a strict worker (it tracks every sequence
// it was told about and rejects plans a real worker would reject) and answers
// with tokens, beam candidates and verifications chosen by the test; and
// ScriptedDraftPool, a DraftPool that proposes what the test says and
// records every rollback. Plus a toy tokenizer: token 0 is EOS, tokens
// 1..kToyVocab-1 are the letters "a".."z" and "A".."E".
#ifndef TANDEM_TESTS_UNIT_COORDINATOR_SCHEDULER_SCRIPTED_WORKER_GROUP_H_
#define TANDEM_TESTS_UNIT_COORDINATOR_SCHEDULER_SCRIPTED_WORKER_GROUP_H_

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "coordinator/scheduler/draft_pool.h"
#include "coordinator/scheduler/worker_group.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::coordinator::testing {

inline constexpr int32_t kToyVocab = 32;
inline constexpr int32_t kToyEos = 0;

inline std::unique_ptr<tokenizer::Tokenizer> ToyTokenizer() {
  tokenizer::Vocab vocab;
  vocab.tokens.push_back("</s>");
  vocab.types.push_back(tokenizer::TokenType::kControl);
  for (int32_t i = 1; i < kToyVocab; ++i) {
    vocab.tokens.push_back(std::string(1, i <= 26 ? static_cast<char>('a' + i - 1)
                                                  : static_cast<char>('A' + i - 27)));
    vocab.types.push_back(tokenizer::TokenType::kNormal);
  }
  vocab.eos_id = kToyEos;
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> t =
      tokenizer::Tokenizer::Create(std::move(vocab));
  CHECK(t.ok(), "%s", t.status().ToString());
  return *std::move(t);
}

// What the worker knows of one sequence: its history and how it samples.
struct ScriptedSequence {
  std::vector<int32_t> tokens;  // prompt + output, then every computed token
  int32_t num_computed = 0;
  sampling::SamplingParams params;
  uint64_t stream = 0;
};

// The next token after `history` (the default: the letter after the last
// token, wrapping, never EOS).
using TokenScript = std::function<int32_t(const std::vector<int32_t>& history)>;
// Beam candidates after `history`, best first (score = key).
using BeamScript =
    std::function<std::vector<sampling::BeamToken>(const std::vector<int32_t>& history)>;

inline int32_t NextLetter(const std::vector<int32_t>& history) {
  return history.back() % (kToyVocab - 1) + 1;
}

class ScriptedWorkerGroup : public WorkerGroup {
 public:
  ScriptedWorkerGroup(int32_t num_blocks, int32_t block_size, int32_t context_length = 256) {
    info_.model_name = "scripted";
    info_.vocab_size = kToyVocab;
    info_.context_length = context_length;
    info_.num_blocks = num_blocks;
    info_.block_size = block_size;
  }

  const WorkerGroupInfo& info() const override { return info_; }

  // Greedy tokens: the worker samples next_token(history); verification
  // accepts the drafts that equal it (exact greedy speculation).
  TokenScript next_token = NextLetter;
  // Beam rows (params.beam_candidates > 0) get beam_candidates(history),
  // cut to the requested count.
  BeamScript beam_candidates;
  // Whether a beam row with drafts gets the candidates after each draft.
  bool beam_draft_rows = true;

  // The next Step fails with `status` and changes nothing.
  void FailNextStep(absl::Status status) { fail_next_ = std::move(status); }

  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    if (!fail_next_.ok()) {
      absl::Status s = std::move(fail_next_);
      fail_next_ = absl::OkStatus();
      return s;
    }
    plans_.push_back(plan);
    // As the real executor: forgetting an unknown id is allowed (a sequence
    // announced in a step that failed).
    for (SeqId id : plan.finished) sequences_.erase(id);
    for (const worker::NewSequence& ns : plan.new_sequences) {
      CHECK(!sequences_.contains(ns.id), "sequence %d announced twice", ns.id.value());
      ScriptedSequence& s = sequences_[ns.id];
      s.tokens = ns.prompt_tokens;
      s.tokens.insert(s.tokens.end(), ns.output_tokens.begin(), ns.output_tokens.end());
      s.params = ns.params;
      s.stream = ns.stream;
    }
    worker::StepResult result;
    result.step_id = plan.step_id;
    for (const worker::SequenceStep& step : plan.sequences) {
      result.timings.num_tokens += static_cast<int64_t>(step.tokens.size());
      std::optional<worker::SequenceResult> r = RunSequence(plan.step_id, step);
      if (r.has_value()) result.results.push_back(*std::move(r));
    }
    return result;
  }

  const std::vector<worker::StepPlan>& plans() const { return plans_; }
  const worker::StepPlan& last_plan() const { return plans_.back(); }
  int64_t num_known_sequences() const { return static_cast<int64_t>(sequences_.size()); }

 private:
  std::optional<worker::SequenceResult> RunSequence(int64_t step_id,
                                                    const worker::SequenceStep& step) {
    auto it = sequences_.find(step.id);
    CHECK(it != sequences_.end(), "step %d runs unannounced sequence %d", step_id,
          step.id.value());
    ScriptedSequence& s = it->second;
    const int32_t end = step.start_pos + static_cast<int32_t>(step.tokens.size());
    CHECK(static_cast<int64_t>(step.block_table.size()) * info_.block_size >= end,
          "sequence %d: %d blocks do not cover %d tokens", step.id.value(),
          step.block_table.size(), end);
    CHECK(step.start_pos <= static_cast<int32_t>(s.tokens.size()),
          "sequence %d starts at %d past its %d known tokens", step.id.value(), step.start_pos,
          s.tokens.size());
    // The worker's view of the history: what it knew up to start_pos, then
    // the step's tokens (drafts included).
    s.tokens.resize(step.start_pos);
    s.tokens.insert(s.tokens.end(), step.tokens.begin(), step.tokens.end());
    s.num_computed = end;
    if (!step.sample) return std::nullopt;
    worker::SequenceResult r;
    r.id = step.id;
    const int32_t g = step.num_draft_tokens;
    std::vector<int32_t> history(s.tokens.begin(), s.tokens.end() - g);
    if (s.params.beam_candidates > 0) {
      r.sample.beam_candidates = Candidates(history, s.params.beam_candidates);
      r.sample.token = r.sample.beam_candidates.front().token;
      for (int32_t i = 0; i < g && beam_draft_rows; ++i) {
        history.push_back(s.tokens[s.tokens.size() - g + i]);
        r.draft_beam_candidates.push_back(Candidates(history, s.params.beam_candidates));
      }
      return r;
    }
    for (int32_t i = 0; i < g; ++i) {
      const int32_t want = next_token(history);
      const int32_t draft = s.tokens[s.tokens.size() - g + i];
      if (draft != want) break;
      r.accepted_drafts.push_back({draft, -0.5f, {}, {}});
      history.push_back(draft);
    }
    r.sample.token = next_token(history);
    r.sample.logprob = -0.25f;
    // Rejected drafts leave the worker's history (their K/V is garbage).
    s.tokens = history;
    return r;
  }

  std::vector<sampling::BeamToken> Candidates(const std::vector<int32_t>& history,
                                              int32_t count) const {
    std::vector<sampling::BeamToken> all = beam_candidates(history);
    CHECK(static_cast<int32_t>(all.size()) >= count, "beam script gave %d candidates, %d wanted",
          all.size(), count);
    all.resize(count);
    return all;
  }

  WorkerGroupInfo info_;
  absl::Status fail_next_;
  std::map<SeqId, ScriptedSequence> sequences_;
  std::vector<worker::StepPlan> plans_;
};

// Proposes propose(history, gamma) for every request and records every
// Release; a sequence listed in `lose` comes back with ok = false.
class ScriptedDraftPool : public DraftPool {
 public:
  struct Rollback {
    SeqId seq;
    int32_t keep_length = 0;
  };

  std::function<std::vector<int32_t>(const std::vector<int32_t>& history, int32_t gamma)>
      propose;

  std::vector<DraftProposal> Propose(std::span<const DraftRequest> requests) override {
    std::vector<DraftProposal> out;
    int64_t sent = 0;
    for (const DraftRequest& d : requests) sent += static_cast<int64_t>(d.new_tokens.size());
    tokens_per_call.push_back(sent);
    for (const DraftRequest& d : requests) {
      std::vector<int32_t>& held = held_[d.seq];
      CHECK(static_cast<int32_t>(held.size()) >= d.start_pos,
            "sequence %d: start_pos %d past the %d tokens the draft holds", d.seq.value(),
            d.start_pos, held.size());
      held.resize(d.start_pos);
      held.insert(held.end(), d.new_tokens.begin(), d.new_tokens.end());
      ++num_proposals;
      DraftProposal p;
      p.tokens = propose(held, d.gamma);
      CHECK(static_cast<int32_t>(p.tokens.size()) <= d.gamma, "script proposed too many");
      p.probs.resize(p.tokens.size());  // one-hot q: a deterministic draft
      // The draft holds every proposed token but the last (proposer contract).
      if (!p.tokens.empty()) held.insert(held.end(), p.tokens.begin(), p.tokens.end() - 1);
      out.push_back(std::move(p));
    }
    return out;
  }

  bool Release(SeqId seq, int32_t keep_length) override {
    releases.push_back({seq, keep_length});
    if (keep_length == 0) {
      held_.erase(seq);
    } else {
      auto it = held_.find(seq);
      CHECK(it != held_.end(), "release of unknown draft sequence %d", seq.value());
      CHECK(keep_length <= static_cast<int32_t>(it->second.size()),
            "sequence %d: keep %d past the %d held tokens", seq.value(), keep_length,
            it->second.size());
      it->second.resize(keep_length);
    }
    return true;
  }

  std::string name() const override { return "scripted"; }
  bool Serves(std::string_view kind) const override { return kind.empty() || kind == "ngram"; }

  // Tokens the draft holds for `seq` (0 when it forgot it).
  int32_t held(SeqId seq) const {
    auto it = held_.find(seq);
    return it == held_.end() ? 0 : static_cast<int32_t>(it->second.size());
  }
  int64_t num_held_sequences() const { return static_cast<int64_t>(held_.size()); }

  std::vector<Rollback> releases;
  int64_t num_proposals = 0;
  std::vector<int64_t> tokens_per_call;  // history tokens each Propose carried

 private:
  std::map<SeqId, std::vector<int32_t>> held_;
};

}  // namespace tandem::coordinator::testing

#endif  // TANDEM_TESTS_UNIT_COORDINATOR_SCHEDULER_SCRIPTED_WORKER_GROUP_H_
