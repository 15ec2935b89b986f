// The TargetWorker step protocol: StepEncoder (coordinator) → wire →
// StepDecoder (worker) reproduces every native plan exactly, sends only
// diffs, rejects malformed requests with errors naming the value, and step
// results and sampling params survive their conversions.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/step_encoder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/sampling_codec.h"
#include "protocol/step_decoder.h"
#include "protocol/step_result_codec.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kVocab = 100;
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kBlockSize = 4;

protocol::StepDecoderConfig Config() { return {kVocab, kNumBlocks, kBlockSize}; }

// Field-by-field equality of the native types (they define no operator==),
// reported with the first difference so a failure says where.
void ExpectParamsEq(const sampling::SamplingParams& a, const sampling::SamplingParams& b,
                    const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.min_tokens, b.min_tokens);
  EXPECT_EQ(a.stop_token_ids, b.stop_token_ids);
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.ignore_eos, b.ignore_eos);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.n, b.n);
}

// A step's new sequence reaches the worker without stop strings (the
// coordinator matches them); everything else is as encoded.
void ExpectStepParamsEq(const sampling::SamplingParams& sent,
                        const sampling::SamplingParams& received, const std::string& where) {
  EXPECT_TRUE(received.stop.empty()) << where << ": stop strings went to the worker";
  sampling::SamplingParams expected = sent;
  expected.stop.clear();
  ExpectParamsEq(expected, received, where);
}

void ExpectPlanEq(const worker::StepPlan& a, const worker::StepPlan& b) {
  std::string where = "step " + std::to_string(a.step_id);
  SCOPED_TRACE(where);
  EXPECT_EQ(a.step_id, b.step_id);
  EXPECT_EQ(a.finished, b.finished);
  ASSERT_EQ(a.new_sequences.size(), b.new_sequences.size());
  for (size_t i = 0; i < a.new_sequences.size(); ++i) {
    const worker::NewSequence& x = a.new_sequences[i];
    const worker::NewSequence& y = b.new_sequences[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.prompt_tokens, y.prompt_tokens);
    EXPECT_EQ(x.output_tokens, y.output_tokens);
    ExpectStepParamsEq(x.params, y.params,
                       where + " new sequence " + std::to_string(x.id.value()));
    EXPECT_EQ(x.seed, y.seed);
    EXPECT_EQ(x.stream, y.stream);
  }
  EXPECT_EQ(a.copies, b.copies);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    const worker::SequenceStep& x = a.sequences[i];
    const worker::SequenceStep& y = b.sequences[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.start_pos, y.start_pos);
    EXPECT_EQ(x.block_table, y.block_table) << "sequence " << x.id.value();
    EXPECT_EQ(x.sample, y.sample);
    EXPECT_EQ(x.num_draft_tokens, y.num_draft_tokens) << "sequence " << x.id.value();
    ASSERT_EQ(x.draft_probs.size(), y.draft_probs.size()) << "sequence " << x.id.value();
    for (size_t j = 0; j < x.draft_probs.size(); ++j) {
      EXPECT_EQ(x.draft_probs[j].prob, y.draft_probs[j].prob);
      EXPECT_EQ(x.draft_probs[j].support_tokens, y.draft_probs[j].support_tokens);
      EXPECT_EQ(x.draft_probs[j].support_probs, y.draft_probs[j].support_probs);
    }
  }
}

// Encodes, sends through the wire format, decodes.
absl::StatusOr<worker::StepPlan> RoundTrip(protocol::StepEncoder& encoder,
                                           protocol::StepDecoder& decoder,
                                           const worker::StepPlan& plan,
                                           tandem::v1::StepRequest* sent = nullptr) {
  absl::StatusOr<tandem::v1::StepRequest> request = encoder.Encode(plan);
  if (!request.ok()) return request.status();
  std::string wire;
  if (!request->SerializeToString(&wire)) return absl::InternalError("serialize failed");
  tandem::v1::StepRequest received;
  if (!received.ParseFromString(wire)) return absl::InternalError("parse failed");
  if (sent != nullptr) *sent = received;
  return decoder.Decode(received);
}

sampling::SamplingParams RandomParams(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 1);
  sampling::SamplingParams p;
  p.temperature = std::uniform_real_distribution<float>(0.0f, 2.0f)(rng);
  p.top_k = std::uniform_int_distribution<int32_t>(-1, 50)(rng);
  p.top_p = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
  p.min_p = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
  p.repetition_penalty = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
  p.presence_penalty = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  p.frequency_penalty = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  if (coin(rng)) p.seed = rng();
  p.max_tokens = std::uniform_int_distribution<int32_t>(1, 500)(rng);
  p.min_tokens = std::uniform_int_distribution<int32_t>(0, p.max_tokens)(rng);
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) {
    p.stop_token_ids.push_back(std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng));
  }
  for (int i = std::uniform_int_distribution<int>(0, 2)(rng); i > 0; --i) {
    p.stop.push_back(coin(rng) ? "\n\n" : "stop " + std::to_string(i));
  }
  p.ignore_eos = coin(rng);
  p.logprobs = std::uniform_int_distribution<int32_t>(0, sampling::kMaxLogprobs)(rng);
  p.n = std::uniform_int_distribution<int32_t>(1, 8)(rng);
  return p;
}

std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int n) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng);
  return tokens;
}

// A valid q for draft token `token`: one-hot (empty support) or a random
// support containing it.
sampling::DraftProbs RandomDraftProbs(std::mt19937_64& rng, int32_t token) {
  sampling::DraftProbs q;
  if (std::bernoulli_distribution(0.4)(rng)) return q;
  const int n = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int i = 0; i < n; ++i) {
    q.support_tokens.push_back(i == 0 ? token
                                      : std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng));
    q.support_probs.push_back(std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));
  }
  q.prob = std::max(q.support_probs[0], 1e-3f);
  return q;
}

BlockId RandomBlock(std::mt19937_64& rng) {
  return BlockId(std::uniform_int_distribution<int32_t>(0, kNumBlocks - 1)(rng));
}

// A coordinator-like simulation: sequences are admitted (fresh or re-admitted
// after preemption with their output), grow by prefill chunks and decode
// tokens, get copy-on-write replacements of their last block, roll back
// (truncation), have arbitrary blocks swapped, and finish. Every plan must
// come out of the decoder exactly as it went into the encoder, and the wire
// must carry far fewer block ids than the full tables.
TEST(StepCodecTest, RandomizedPlansRoundTripExactly) {
  std::mt19937_64 rng(20240611);
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  protocol::StepEncoder encoder;
  protocol::StepDecoder decoder(Config());

  struct Live {
    int32_t length = 0;  // positions computed
    std::vector<BlockId> table;
  };
  std::map<int64_t, Live> live;  // what the simulated coordinator holds
  int64_t next_id = 0;
  int64_t full_table_ids = 0;
  int64_t sent_block_ids = 0;
  int num_truncations = 0, num_readmits = 0, num_copies = 0, num_unknown_finished = 0;
  int num_verifications = 0;

  constexpr int kSteps = 1500;
  for (int step = 0; step < kSteps; ++step) {
    worker::StepPlan plan;
    plan.step_id = step;
    std::vector<int64_t> to_add;
    for (auto it = live.begin(); it != live.end();) {
      if (chance(0.05)) {
        plan.finished.push_back(SeqId(it->first));
        if (chance(0.3)) to_add.push_back(it->first);  // preempted, re-admitted at once
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    if (chance(0.02)) {  // a fork parent never sent to the worker
      plan.finished.push_back(SeqId(1'000'000 + step));
      ++num_unknown_finished;
    }
    int num_new = live.size() < 12 ? std::uniform_int_distribution<int>(0, 2)(rng) : 0;
    for (int i = 0; i < num_new; ++i) to_add.push_back(next_id++);
    for (int64_t id : to_add) {
      worker::NewSequence ns;
      ns.id = SeqId(id);
      ns.prompt_tokens = RandomTokens(rng, std::uniform_int_distribution<int>(1, 20)(rng));
      if (chance(0.3)) {
        ns.output_tokens = RandomTokens(rng, std::uniform_int_distribution<int>(1, 10)(rng));
        ++num_readmits;
      }
      ns.params = RandomParams(rng);
      ns.seed = rng();
      ns.stream = std::uniform_int_distribution<uint64_t>(0, 7)(rng);
      plan.new_sequences.push_back(std::move(ns));
      live[id] = Live{};
    }

    for (auto& [id, s] : live) {
      bool is_new = s.length == 0 && s.table.empty();
      if (!is_new && chance(0.2)) continue;  // not scheduled this step
      if (!is_new && s.length > 0 && chance(0.05)) {  // roll back (speculation, beams)
        s.length = std::uniform_int_distribution<int32_t>(0, s.length - 1)(rng);
        size_t keep = (s.length + kBlockSize - 1) / kBlockSize;
        s.table.resize(keep);
        ++num_truncations;
      }
      if (!s.table.empty() && chance(0.1)) {  // copy-on-write of the last block
        BlockId dst = RandomBlock(rng);
        plan.copies.push_back({s.table.back(), dst});
        s.table.back() = dst;
        ++num_copies;
      }
      if (s.table.size() > 2 && chance(0.02)) {  // an arbitrary in-place change
        s.table[std::uniform_int_distribution<size_t>(0, s.table.size() - 2)(rng)] =
            RandomBlock(rng);
      }
      int n = chance(0.7) ? 1 : std::uniform_int_distribution<int>(2, 9)(rng);
      worker::SequenceStep st;
      st.id = SeqId(id);
      st.tokens = RandomTokens(rng, n);
      st.start_pos = s.length;
      s.length += n;
      while (static_cast<int32_t>(s.table.size()) * kBlockSize < s.length) {
        s.table.push_back(RandomBlock(rng));
      }
      st.block_table = s.table;
      st.sample = chance(0.8);
      if (st.sample && n >= 2 && chance(0.3)) {  // verify drafts
        st.num_draft_tokens = std::uniform_int_distribution<int32_t>(1, n - 1)(rng);
        for (int32_t i = 0; i < st.num_draft_tokens; ++i) {
          st.draft_probs.push_back(RandomDraftProbs(rng, st.tokens[n - st.num_draft_tokens + i]));
        }
        ++num_verifications;
      }
      full_table_ids += static_cast<int64_t>(s.table.size());
      plan.sequences.push_back(std::move(st));
    }
    // The scheduler's order is not sorted by id; shuffle to make sure order
    // is preserved rather than reconstructed.
    std::shuffle(plan.sequences.begin(), plan.sequences.end(), rng);

    tandem::v1::StepRequest sent;
    absl::StatusOr<worker::StepPlan> decoded = RoundTrip(encoder, decoder, plan, &sent);
    ASSERT_TRUE(decoded.ok()) << "step " << step << ": " << decoded.status();
    ExpectPlanEq(plan, *decoded);
    if (testing::Test::HasFailure()) return;
    for (const tandem::v1::SequenceStep& s : sent.sequences()) {
      sent_block_ids += s.new_block_ids_size();
    }
    ASSERT_EQ(encoder.num_sequences(), static_cast<int32_t>(live.size()));
    ASSERT_EQ(decoder.num_sequences(), static_cast<int32_t>(live.size()));
  }
  // The simulation exercised every path, and diffs are much smaller than the
  // tables they stand for.
  EXPECT_GT(num_truncations, 20);
  EXPECT_GT(num_readmits, 20);
  EXPECT_GT(num_copies, 100);
  EXPECT_GT(num_unknown_finished, 5);
  EXPECT_GT(num_verifications, 100);
  EXPECT_LT(sent_block_ids * 4, full_table_ids)
      << "sent " << sent_block_ids << " block ids for " << full_table_ids << " table entries";
}

worker::NewSequence NewSeq(int64_t id, std::vector<int32_t> prompt) {
  worker::NewSequence ns;
  ns.id = SeqId(id);
  ns.prompt_tokens = std::move(prompt);
  return ns;
}

worker::SequenceStep Step(int64_t id, std::vector<int32_t> tokens, int32_t start_pos,
                          std::vector<int32_t> table, bool sample = true) {
  worker::SequenceStep s;
  s.id = SeqId(id);
  s.tokens = std::move(tokens);
  s.start_pos = start_pos;
  for (int32_t b : table) s.block_table.push_back(BlockId(b));
  s.sample = sample;
  return s;
}

std::vector<int32_t> SentBlocks(const tandem::v1::SequenceStep& s) {
  return {s.new_block_ids().begin(), s.new_block_ids().end()};
}

// n = 128 samples of one request (a long prompt, a long stop string) are
// announced together: the prompt and sampling go once, the stop string not
// at all, and the worker gets every sequence whole.
TEST(StepCodecTest, SequencesOfOneRequestShareTheirPromptOnTheWire) {
  protocol::StepEncoder encoder;
  protocol::StepDecoder decoder({kVocab, 4096, kBlockSize});
  std::vector<int32_t> prompt(2000);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % kVocab);
  sampling::SamplingParams params;
  params.temperature = 0.7f;
  params.n = 128;
  params.stop = {std::string(4000, 'x')};
  worker::StepPlan plan;
  plan.step_id = 1;
  for (int64_t id = 1; id <= 128; ++id) {
    worker::NewSequence ns = NewSeq(id, prompt);
    ns.params = params;
    ns.seed = 42;
    ns.stream = static_cast<uint64_t>(id - 1);
    plan.new_sequences.push_back(ns);
  }
  // Another request in the same step: its own prompt, then its sibling.
  plan.new_sequences.push_back(NewSeq(200, {1, 2, 3}));
  plan.new_sequences.push_back(NewSeq(201, {1, 2, 3}));
  tandem::v1::StepRequest sent;
  absl::StatusOr<worker::StepPlan> got = RoundTrip(encoder, decoder, plan, &sent);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectPlanEq(plan, *got);
  int with_prompt = 0;
  for (const tandem::v1::NewSequence& ns : sent.new_sequences()) {
    with_prompt += ns.prompt_tokens_size() > 0 ? 1 : 0;
  }
  EXPECT_EQ(with_prompt, 2);
  EXPECT_EQ(sent.new_sequences(1).same_prompt_as(), 1);
  EXPECT_EQ(sent.new_sequences(129).same_prompt_as(), 200);
  // One prompt's worth of bytes (~4 KB of varints), not 128.
  EXPECT_LT(sent.ByteSizeLong(), 2 * 2000 * 2 + 128 * 64) << sent.ByteSizeLong();
}

TEST(StepCodecTest, SamePromptAsMustNameAnEarlierNewSequence) {
  protocol::StepDecoder decoder({kVocab, kNumBlocks, kBlockSize});
  tandem::v1::StepRequest r;
  r.set_step_id(1);
  tandem::v1::NewSequence* a = r.add_new_sequences();
  a->set_seq_id(1);
  a->set_same_prompt_as(2);  // later, not earlier
  tandem::v1::NewSequence* b = r.add_new_sequences();
  b->set_seq_id(2);
  b->add_prompt_tokens(1);
  absl::StatusOr<worker::StepPlan> got = decoder.Decode(r);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("same_prompt_as 2"), std::string::npos) << got.status();
}

TEST(StepCodecTest, DecodeStepWithUnchangedTableSendsNoBlockIds) {
  protocol::StepEncoder encoder;
  protocol::StepDecoder decoder(Config());
  tandem::v1::StepRequest sent;

  worker::StepPlan prefill;
  prefill.step_id = 1;
  prefill.new_sequences.push_back(NewSeq(7, {1, 2, 3, 4, 5}));
  prefill.sequences.push_back(Step(7, {1, 2, 3, 4, 5}, 0, {10, 11}));
  ASSERT_TRUE(RoundTrip(encoder, decoder, prefill, &sent).ok());
  EXPECT_EQ(SentBlocks(sent.sequences(0)), (std::vector<int32_t>{10, 11}));
  EXPECT_FALSE(sent.sequences(0).has_truncate_blocks_to());

  // Positions 5..7 fit in block 11: nothing about the table is sent.
  for (int32_t pos = 5; pos < 8; ++pos) {
    worker::StepPlan decode;
    decode.step_id = pos;
    decode.sequences.push_back(Step(7, {42}, pos, {10, 11}));
    absl::StatusOr<worker::StepPlan> got = RoundTrip(encoder, decoder, decode, &sent);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectPlanEq(decode, *got);
    EXPECT_EQ(sent.sequences(0).new_block_ids_size(), 0) << "position " << pos;
    EXPECT_FALSE(sent.sequences(0).has_truncate_blocks_to());
    EXPECT_EQ(sent.new_sequences_size(), 0);
  }

  // Position 8 opens block 12: exactly that id is sent.
  worker::StepPlan grow;
  grow.step_id = 8;
  grow.sequences.push_back(Step(7, {42}, 8, {10, 11, 12}));
  ASSERT_TRUE(RoundTrip(encoder, decoder, grow, &sent).ok());
  EXPECT_EQ(SentBlocks(sent.sequences(0)), (std::vector<int32_t>{12}));
  EXPECT_FALSE(sent.sequences(0).has_truncate_blocks_to());

  // Copy-on-write of the last block: cut to 2, send the replacement.
  worker::StepPlan cow;
  cow.step_id = 9;
  cow.copies.push_back({BlockId(12), BlockId(13)});
  cow.sequences.push_back(Step(7, {42}, 9, {10, 11, 13}));
  absl::StatusOr<worker::StepPlan> got = RoundTrip(encoder, decoder, cow, &sent);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectPlanEq(cow, *got);
  EXPECT_EQ(SentBlocks(sent.sequences(0)), (std::vector<int32_t>{13}));
  ASSERT_TRUE(sent.sequences(0).has_truncate_blocks_to());
  EXPECT_EQ(sent.sequences(0).truncate_blocks_to(), 2);

  // Rollback to position 3: the table shrinks to one block, nothing appended.
  worker::StepPlan rollback;
  rollback.step_id = 10;
  rollback.sequences.push_back(Step(7, {9}, 3, {10}));
  got = RoundTrip(encoder, decoder, rollback, &sent);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectPlanEq(rollback, *got);
  EXPECT_EQ(sent.sequences(0).new_block_ids_size(), 0);
  EXPECT_EQ(sent.sequences(0).truncate_blocks_to(), 1);
}

TEST(StepCodecTest, FinishedSequenceIsForgottenAndCanBeReadmitted) {
  protocol::StepEncoder encoder;
  protocol::StepDecoder decoder(Config());
  worker::StepPlan a;
  a.new_sequences.push_back(NewSeq(1, {1, 2}));
  a.sequences.push_back(Step(1, {1, 2}, 0, {5}));
  ASSERT_TRUE(RoundTrip(encoder, decoder, a).ok());
  EXPECT_EQ(decoder.num_sequences(), 1);

  // Finished and re-admitted in one step (preemption): the table starts over.
  worker::StepPlan b;
  b.step_id = 1;
  b.finished.push_back(SeqId(1));
  worker::NewSequence again = NewSeq(1, {1, 2});
  again.output_tokens = {3};
  b.new_sequences.push_back(again);
  b.sequences.push_back(Step(1, {1, 2, 3}, 0, {5}));
  tandem::v1::StepRequest sent;
  absl::StatusOr<worker::StepPlan> got = RoundTrip(encoder, decoder, b, &sent);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectPlanEq(b, *got);
  EXPECT_EQ(SentBlocks(sent.sequences(0)), (std::vector<int32_t>{5}));

  worker::StepPlan c;
  c.step_id = 2;
  c.finished.push_back(SeqId(1));
  ASSERT_TRUE(RoundTrip(encoder, decoder, c).ok());
  EXPECT_EQ(encoder.num_sequences(), 0);
  EXPECT_EQ(decoder.num_sequences(), 0);

  worker::StepPlan d;
  d.step_id = 3;
  d.sequences.push_back(Step(1, {4}, 3, {5}));
  absl::StatusOr<tandem::v1::StepRequest> rejected = encoder.Encode(d);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("sequence 1"));
}

TEST(StepCodecTest, EncoderRejectsInconsistentPlansWithoutChangingState) {
  protocol::StepEncoder encoder;
  worker::StepPlan a;
  a.new_sequences.push_back(NewSeq(3, {1}));
  a.sequences.push_back(Step(3, {1}, 0, {0}));
  ASSERT_TRUE(encoder.Encode(a).ok());

  worker::StepPlan dup_new;
  dup_new.new_sequences.push_back(NewSeq(3, {1}));
  EXPECT_THAT(encoder.Encode(dup_new).status().message(), HasSubstr("new sequence 3"));

  worker::StepPlan twice;
  twice.sequences.push_back(Step(3, {2}, 1, {0}));
  twice.sequences.push_back(Step(3, {2}, 1, {0}));
  EXPECT_THAT(encoder.Encode(twice).status().message(), HasSubstr("appears twice"));

  // A rejected plan that also finished sequence 3 must not have forgotten it.
  worker::StepPlan bad;
  bad.finished.push_back(SeqId(3));
  bad.sequences.push_back(Step(99, {2}, 0, {0}));
  EXPECT_THAT(encoder.Encode(bad).status().message(), HasSubstr("sequence 99"));
  EXPECT_EQ(encoder.num_sequences(), 1);

  worker::StepPlan next;
  next.sequences.push_back(Step(3, {2}, 1, {0}));
  absl::StatusOr<tandem::v1::StepRequest> ok = encoder.Encode(next);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->sequences(0).new_block_ids_size(), 0);
}

// A live sequence 5 with table [1, 2] (block_size 4, 6 positions computed).
class MalformedRequestTest : public testing::Test {
 protected:
  void SetUp() override {
    tandem::v1::StepRequest r;
    tandem::v1::NewSequence* ns = r.add_new_sequences();
    ns->set_seq_id(5);
    ns->add_prompt_tokens(1);
    protocol::SamplingParamsToProto({}, ns->mutable_sampling());
    tandem::v1::SequenceStep* s = r.add_sequences();
    s->set_seq_id(5);
    for (int i = 0; i < 6; ++i) s->add_tokens(i);
    s->add_new_block_ids(1);
    s->add_new_block_ids(2);
    ASSERT_TRUE(decoder_.Decode(r).ok());
  }

  // A decode step of sequence 5 at position 6 that changes nothing.
  static tandem::v1::StepRequest ValidStep() {
    tandem::v1::StepRequest r;
    r.set_step_id(2);
    tandem::v1::SequenceStep* s = r.add_sequences();
    s->set_seq_id(5);
    s->add_tokens(7);
    s->set_start_pos(6);
    s->set_sample(true);
    return r;
  }

  // Expects `r` rejected with InvalidArgument mentioning each of `parts`, and
  // the decoder still able to decode a valid step afterwards (no partial
  // state change).
  // Succeeds when `r` is rejected with InvalidArgument naming every part, and
  // the decoder still accepts a valid step afterwards (nothing half-applied).
  ::testing::AssertionResult Rejected(const tandem::v1::StepRequest& r,
                                      std::vector<std::string> parts) {
    absl::StatusOr<worker::StepPlan> got = decoder_.Decode(r);
    if (got.ok()) return ::testing::AssertionFailure() << "malformed step was accepted";
    if (got.status().code() != absl::StatusCode::kInvalidArgument) {
      return ::testing::AssertionFailure() << "expected InvalidArgument, got " << got.status();
    }
    for (const std::string& p : parts) {
      if (got.status().message().find(p) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message \"" << got.status().message() << "\" lacks \"" << p << "\"";
      }
    }
    absl::StatusOr<worker::StepPlan> valid = decoder_.Decode(ValidStep());
    if (!valid.ok()) return ::testing::AssertionFailure() << "valid step after: " << valid.status();
    if (valid->sequences[0].block_table != std::vector<BlockId>{BlockId(1), BlockId(2)}) {
      return ::testing::AssertionFailure() << "decoder state changed by the rejected step";
    }
    return ::testing::AssertionSuccess();
  }


  protocol::StepDecoder decoder_{Config()};
};

TEST_F(MalformedRequestTest, UnknownSequence) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->set_seq_id(6);
  EXPECT_TRUE(Rejected(r, {"sequence 6", "not live"}));
}

TEST_F(MalformedRequestTest, FinishedSequenceCannotStep) {
  tandem::v1::StepRequest r = ValidStep();
  r.add_finished_seq_ids(5);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "not live"}));
}

TEST_F(MalformedRequestTest, NewSequenceAlreadyLive) {
  tandem::v1::StepRequest r;
  r.add_new_sequences()->set_seq_id(5);
  EXPECT_TRUE(Rejected(r, {"new sequence 5", "already live"}));
}

TEST_F(MalformedRequestTest, SequenceTwiceInBatch) {
  tandem::v1::StepRequest r = ValidStep();
  *r.add_sequences() = r.sequences(0);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "twice"}));
}

TEST_F(MalformedRequestTest, TokenOutOfRange) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->set_tokens(0, kVocab);
  EXPECT_TRUE(Rejected(r, {"tokens[0] = 100", "[0, 100)"}));
  r = ValidStep();
  r.mutable_sequences(0)->set_tokens(0, -3);
  EXPECT_TRUE(Rejected(r, {"-3", "[0, 100)"}));
}

TEST_F(MalformedRequestTest, PromptTokenOutOfRange) {
  tandem::v1::StepRequest r;
  tandem::v1::NewSequence* ns = r.add_new_sequences();
  ns->set_seq_id(8);
  ns->add_prompt_tokens(3);
  ns->add_prompt_tokens(5000);
  EXPECT_TRUE(Rejected(r, {"sequence 8", "prompt_tokens[1] = 5000", "[0, 100)"}));
}

TEST_F(MalformedRequestTest, BadSamplingParams) {
  tandem::v1::StepRequest r;
  tandem::v1::NewSequence* ns = r.add_new_sequences();
  ns->set_seq_id(8);
  ns->mutable_sampling()->set_temperature(-0.5f);
  EXPECT_TRUE(Rejected(r, {"sequence 8", "temperature", "-0.5"}));
}

TEST_F(MalformedRequestTest, BeamSamplingAtTemperatureZero) {
  // Tripped a CHECK in the worker's beam warpers (they divide by it).
  tandem::v1::StepRequest r;
  tandem::v1::NewSequence* ns = r.add_new_sequences();
  ns->set_seq_id(8);
  ns->mutable_sampling()->set_temperature(0.0f);
  ns->set_beam_candidates(4);
  ns->set_beam_sample(true);
  EXPECT_TRUE(Rejected(r, {"sequence 8", "beam_sample", "temperature 0"}));
  ns->mutable_sampling()->set_temperature(1.0f);
  ns->set_beam_candidates(0);
  EXPECT_TRUE(Rejected(r, {"sequence 8", "beam_candidates 0"}));
}

TEST_F(MalformedRequestTest, NewBlockIdOutOfRange) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->add_new_block_ids(kNumBlocks);
  EXPECT_TRUE(Rejected(r, {"new block id 64", "sequence 5", "[0, 64)"}));
}

TEST_F(MalformedRequestTest, CopyBlockOutOfRange) {
  tandem::v1::StepRequest r = ValidStep();
  tandem::v1::BlockCopy* c = r.add_copies();
  c->set_src_block_id(1);
  c->set_dst_block_id(-1);
  EXPECT_TRUE(Rejected(r, {"block copy destination -1", "[0, 64)"}));
}

TEST_F(MalformedRequestTest, TruncateBeyondTable) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->set_truncate_blocks_to(3);
  EXPECT_TRUE(Rejected(r, {"truncate_blocks_to 3", "has 2 blocks"}));
  r.mutable_sequences(0)->set_truncate_blocks_to(-1);
  EXPECT_TRUE(Rejected(r, {"truncate_blocks_to -1"}));
}

TEST_F(MalformedRequestTest, TableDoesNotCoverTokens) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->set_start_pos(8);  // needs a third block
  EXPECT_TRUE(Rejected(r, {"sequence 5", "2 blocks covers 8 positions", "position 9"}));
  r = ValidStep();
  r.mutable_sequences(0)->set_truncate_blocks_to(1);  // shrinks below position 6
  EXPECT_TRUE(Rejected(r, {"1 blocks covers 4 positions"}));
}

TEST_F(MalformedRequestTest, EmptyOrNegativeStep) {
  tandem::v1::StepRequest r = ValidStep();
  r.mutable_sequences(0)->clear_tokens();
  EXPECT_TRUE(Rejected(r, {"sequence 5", "no tokens"}));
  r = ValidStep();
  r.mutable_sequences(0)->set_start_pos(-2);
  EXPECT_TRUE(Rejected(r, {"start_pos -2", ">= 0"}));
}

// A verification step of sequence 5: tokens {7, 8} at position 6, the last
// one a draft with a one-hot q (valid as it is).
tandem::v1::StepRequest DraftStep() {
  tandem::v1::StepRequest r;
  r.set_step_id(3);
  tandem::v1::SequenceStep* s = r.add_sequences();
  s->set_seq_id(5);
  s->add_tokens(7);
  s->add_tokens(8);
  s->set_start_pos(6);
  s->set_sample(true);
  s->set_num_draft_tokens(1);
  s->add_draft_probs()->set_prob(1.0f);
  return r;
}

TEST_F(MalformedRequestTest, ValidDraftStepDecodes) {
  tandem::v1::StepRequest r = DraftStep();
  tandem::v1::DraftProbs* q = r.mutable_sequences(0)->mutable_draft_probs(0);
  q->set_prob(0.75f);
  q->add_support_token_ids(3);
  q->add_support_token_ids(8);
  q->add_support_probs(0.25f);
  q->add_support_probs(0.75f);
  absl::StatusOr<worker::StepPlan> got = decoder_.Decode(r);
  ASSERT_TRUE(got.ok()) << got.status();
  const worker::SequenceStep& s = got->sequences[0];
  EXPECT_EQ(s.num_draft_tokens, 1);
  ASSERT_EQ(s.draft_probs.size(), 1u);
  EXPECT_EQ(s.draft_probs[0].prob, 0.75f);
  EXPECT_EQ(s.draft_probs[0].support_tokens, (std::vector<int32_t>{3, 8}));
  EXPECT_EQ(s.draft_probs[0].support_probs, (std::vector<float>{0.25f, 0.75f}));
}

TEST_F(MalformedRequestTest, NumDraftTokensOutOfRange) {
  tandem::v1::StepRequest r = DraftStep();
  r.mutable_sequences(0)->set_num_draft_tokens(2);  // 2 tokens: at most 1 draft
  r.mutable_sequences(0)->add_draft_probs()->set_prob(1.0f);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "num_draft_tokens 2 is out of range", "[0, 1]"}));
  r = DraftStep();
  r.mutable_sequences(0)->set_num_draft_tokens(-1);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "num_draft_tokens -1", "[0, 1]"}));
}

TEST_F(MalformedRequestTest, DraftsWithoutSample) {
  tandem::v1::StepRequest r = DraftStep();
  r.mutable_sequences(0)->set_sample(false);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "num_draft_tokens 1", "sample = true"}));
}

TEST_F(MalformedRequestTest, DraftProbsNotOnePerDraft) {
  tandem::v1::StepRequest r = DraftStep();
  r.mutable_sequences(0)->clear_draft_probs();
  EXPECT_TRUE(Rejected(r, {"sequence 5", "0 draft_probs for num_draft_tokens 1"}));
  r = DraftStep();
  r.mutable_sequences(0)->set_num_draft_tokens(0);
  EXPECT_TRUE(Rejected(r, {"sequence 5", "1 draft_probs for num_draft_tokens 0"}));
}

TEST_F(MalformedRequestTest, DraftProbOutOfRange) {
  for (float bad : {0.0f, -0.5f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    tandem::v1::StepRequest r = DraftStep();
    tandem::v1::DraftProbs* q = r.mutable_sequences(0)->mutable_draft_probs(0);
    q->set_prob(bad);
    q->add_support_token_ids(8);
    q->add_support_probs(0.5f);
    EXPECT_TRUE(Rejected(r, {"sequence 5", "draft_probs[0]", "of draft token 8 is out of range",
                             "(0, 1]"}))
        << "prob " << bad;
  }
  tandem::v1::StepRequest r = DraftStep();
  r.mutable_sequences(0)->mutable_draft_probs(0)->set_prob(0.5f);  // one-hot needs 1
  EXPECT_TRUE(Rejected(r, {"sequence 5", "prob 0.5", "empty support", "must be 1"}));
}

TEST_F(MalformedRequestTest, DraftSupportMalformed) {
  auto with_support = [](std::vector<int32_t> tokens, std::vector<float> probs) {
    tandem::v1::StepRequest r = DraftStep();
    tandem::v1::DraftProbs* q = r.mutable_sequences(0)->mutable_draft_probs(0);
    q->set_prob(0.5f);
    q->mutable_support_token_ids()->Add(tokens.begin(), tokens.end());
    q->mutable_support_probs()->Add(probs.begin(), probs.end());
    return r;
  };
  EXPECT_TRUE(Rejected(with_support({8, 100}, {0.5f, 0.5f}),
                       {"sequence 5", "support_tokens[1] = 100 is out of range", "[0, 100)"}));
  EXPECT_TRUE(Rejected(with_support({8, -2}, {0.5f, 0.5f}), {"support_tokens[1] = -2"}));
  EXPECT_TRUE(Rejected(with_support({8, 9}, {0.5f}),
                       {"sequence 5", "support_tokens has 2 entries but support_probs 1"}));
  EXPECT_TRUE(Rejected(with_support({8, 9}, {0.5f, 1.25f}),
                       {"sequence 5", "support_probs[1] = 1.25 is out of range", "[0, 1]"}));
  EXPECT_TRUE(Rejected(with_support({3, 9}, {0.5f, 0.5f}),
                       {"sequence 5", "draft token 8 is not in its support of 2 tokens"}));
}

TEST_F(MalformedRequestTest, RejectedRequestDoesNotFinishOrAdd) {
  tandem::v1::StepRequest r = ValidStep();
  r.add_finished_seq_ids(5);
  r.add_new_sequences()->set_seq_id(9);
  r.mutable_sequences(0)->set_seq_id(10);
  EXPECT_TRUE(Rejected(r, {"sequence 10"}));
  EXPECT_EQ(decoder_.num_sequences(), 1);
}

TEST_F(MalformedRequestTest, UnknownFinishedIdIsIgnoredAndResetForgetsAll) {
  tandem::v1::StepRequest r;
  r.add_finished_seq_ids(12345);
  ASSERT_TRUE(decoder_.Decode(r).ok());
  EXPECT_EQ(decoder_.num_sequences(), 1);
  decoder_.Reset();
  EXPECT_EQ(decoder_.num_sequences(), 0);
  EXPECT_FALSE(decoder_.Decode(ValidStep()).ok());
}

sampling::SampleResult Sampled(int32_t token, float logprob,
                               std::vector<sampling::TokenLogprob> top = {}) {
  sampling::SampleResult r;
  r.token = token;
  r.logprob = logprob;
  r.top_logprobs = std::move(top);
  return r;
}

worker::SequenceResult Result(int64_t id, sampling::SampleResult sample) {
  worker::SequenceResult r;
  r.id = SeqId(id);
  r.sample = std::move(sample);
  return r;
}

TEST(StepResultCodecTest, RoundTrip) {
  worker::StepResult result;
  result.step_id = 77;
  result.results.push_back(Result(3, Sampled(12, -0.25f, {{12, -0.25f}, {40, -1.5f}})));
  result.results.push_back(Result(9, Sampled(0, -7.0f)));
  result.timings = {1.5, 0.25, 2.0, 130};
  tandem::v1::StepResponse proto;
  protocol::StepResultToProto(result, &proto);
  std::string wire = proto.SerializeAsString();
  tandem::v1::StepResponse received;
  ASSERT_TRUE(received.ParseFromString(wire));
  absl::StatusOr<worker::StepResult> got = protocol::StepResultFromProto(received, kVocab);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->step_id, 77);
  ASSERT_EQ(got->results.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->results[i].id, result.results[i].id);
    EXPECT_EQ(got->results[i].sample.token, result.results[i].sample.token);
    EXPECT_EQ(got->results[i].sample.logprob, result.results[i].sample.logprob);
    ASSERT_EQ(got->results[i].sample.top_logprobs.size(),
              result.results[i].sample.top_logprobs.size());
    for (size_t j = 0; j < result.results[i].sample.top_logprobs.size(); ++j) {
      EXPECT_EQ(got->results[i].sample.top_logprobs[j].token,
                result.results[i].sample.top_logprobs[j].token);
      EXPECT_EQ(got->results[i].sample.top_logprobs[j].logprob,
                result.results[i].sample.top_logprobs[j].logprob);
    }
  }
  EXPECT_EQ(got->timings.forward_ms, 1.5);
  EXPECT_EQ(got->timings.sample_ms, 0.25);
  EXPECT_EQ(got->timings.total_ms, 2.0);
  EXPECT_EQ(got->timings.num_tokens, 130);
}

TEST(StepResultCodecTest, AcceptedDraftsRoundTrip) {
  worker::StepResult result;
  result.step_id = 5;
  worker::SequenceResult verified = Result(4, Sampled(31, -0.5f, {{31, -0.5f}}));
  verified.accepted_drafts.push_back(Sampled(12, -0.125f, {{12, -0.125f}, {13, -2.0f}}));
  verified.accepted_drafts.push_back(Sampled(40, -1.0f));
  result.results.push_back(verified);
  result.results.push_back(Result(6, Sampled(2, -3.0f)));  // a plain row alongside
  tandem::v1::StepResponse proto;
  protocol::StepResultToProto(result, &proto);
  tandem::v1::StepResponse received;
  ASSERT_TRUE(received.ParseFromString(proto.SerializeAsString()));
  ASSERT_EQ(received.results(0).accepted_drafts_size(), 2);
  EXPECT_EQ(received.results(1).accepted_drafts_size(), 0);
  absl::StatusOr<worker::StepResult> got = protocol::StepResultFromProto(received, kVocab);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->results.size(), 2u);
  const worker::SequenceResult& r = got->results[0];
  EXPECT_EQ(r.sample.token, 31);
  ASSERT_EQ(r.accepted_drafts.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const sampling::SampleResult& want = verified.accepted_drafts[i];
    EXPECT_EQ(r.accepted_drafts[i].token, want.token);
    EXPECT_EQ(r.accepted_drafts[i].logprob, want.logprob);
    ASSERT_EQ(r.accepted_drafts[i].top_logprobs.size(), want.top_logprobs.size());
    for (size_t j = 0; j < want.top_logprobs.size(); ++j) {
      EXPECT_EQ(r.accepted_drafts[i].top_logprobs[j].token, want.top_logprobs[j].token);
      EXPECT_EQ(r.accepted_drafts[i].top_logprobs[j].logprob, want.top_logprobs[j].logprob);
    }
  }
  EXPECT_TRUE(got->results[1].accepted_drafts.empty());

  // Tokens out of range are named.
  received.mutable_results(0)->mutable_accepted_drafts(1)->set_token(kVocab);
  EXPECT_THAT(protocol::StepResultFromProto(received, kVocab).status().message(),
              HasSubstr("accepted draft token 100"));
  received.mutable_results(0)->mutable_accepted_drafts(1)->set_token(1);
  received.mutable_results(0)->mutable_accepted_drafts(0)->mutable_top_logprobs(1)->set_token(-4);
  EXPECT_THAT(protocol::StepResultFromProto(received, kVocab).status().message(),
              HasSubstr("accepted draft top-logprob token -4"));
}

TEST(StepResultCodecTest, RejectsOutOfRangeTokens) {
  tandem::v1::StepResponse proto;
  proto.set_step_id(4);
  tandem::v1::SequenceResult* r = proto.add_results();
  r->set_seq_id(2);
  r->set_token(kVocab);
  absl::StatusOr<worker::StepResult> got = protocol::StepResultFromProto(proto, kVocab);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("sequence 2"));
  EXPECT_THAT(got.status().message(), HasSubstr("sampled token 100"));
  r->set_token(1);
  r->add_top_logprobs()->set_token(-1);
  EXPECT_THAT(protocol::StepResultFromProto(proto, kVocab).status().message(),
              HasSubstr("top-logprob token -1"));
}

TEST(SamplingParamsCodecTest, UnsetFieldsTakeEngineDefaults) {
  sampling::SamplingParams defaults;
  ExpectParamsEq(protocol::SamplingParamsFromProto(tandem::v1::SamplingParams()), defaults,
                 "empty proto");
  // Zero is a real value when set: temperature 0 is greedy, not "default".
  tandem::v1::SamplingParams proto;
  proto.set_temperature(0.0f);
  EXPECT_EQ(protocol::SamplingParamsFromProto(proto).temperature, 0.0f);
}

TEST(SamplingParamsCodecTest, RoundTripKeepsEveryFieldAndSeedPresence) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    sampling::SamplingParams p = RandomParams(rng);
    tandem::v1::SamplingParams proto;
    protocol::SamplingParamsToProto(p, &proto);
    EXPECT_EQ(proto.has_seed(), p.seed.has_value());
    ExpectParamsEq(protocol::SamplingParamsFromProto(proto), p, "params " + std::to_string(i));
  }
}

}  // namespace
}  // namespace tandem
