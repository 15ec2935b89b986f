// Tensor-parallel Model: TP=2 and TP=3 (SmolLM2-135M's 3 KV heads split 2+1
// and 1+1+1) against TP=1 over mixed prefill + decode batches, with the
// in-process ThreadCommunicator (one thread and one Model per rank).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/thread_communicator.h"

namespace tandem::model {
namespace {

constexpr int kBlockSize = 16;
constexpr int kBlocksPerSeq = 8;  // 128 positions per sequence
constexpr int kSteps = 32;

// The prompts (token ids); sequence 2 joins at step 3, so its prefill is
// batched with the others' decodes.
const std::vector<std::vector<int32_t>>& Prompts() {
  static const auto* prompts = new std::vector<std::vector<int32_t>>{
      {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 28, 7018},
      {1, 4093, 314, 260, 3575, 282, 4649, 47},
      {1, 504, 1678, 30, 8767, 4600, 476, 260, 216, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42}};
  return *prompts;
}
constexpr int kJoinStep[] = {0, 0, 3};

struct Trace {
  std::vector<std::vector<int32_t>> tokens;  // per sequence, the greedy continuation
  std::vector<std::vector<float>> logits;    // per step, rank 0's logits
  int32_t vocab = 0;
};

int32_t Argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Runs the driver loop on one rank: the same batches on every rank; rank 0
// computes logits, picks greedy tokens and broadcasts them (as the worker
// does with the step plan); the other ranks skip the output head.
// With `forced` (a TP=1 trace) the tokens fed back are forced's, not this
// run's argmax (teacher forcing), so every step's logits stay comparable.
Trace RunRank(Precision precision, int rank, int world_size, parallel::Communicator* comm,
              const Trace* forced) {
  ModelOptions options;
  options.precision = precision;
  options.num_threads = 1;
  options.tp_rank = rank;
  options.tp_world_size = world_size;
  options.communicator = comm;
  auto loaded = Model::Load(testing::DefaultModelPath(), options);
  CHECK(loaded.ok(), "%s", loaded.status().ToString());
  std::unique_ptr<Model> model = *std::move(loaded);
  const int num_seqs = static_cast<int>(Prompts().size());
  kv::KvStorageConfig sc;
  sc.num_layers = model->config().num_layers;
  sc.num_blocks = num_seqs * kBlocksPerSeq;
  sc.block_size = kBlockSize;
  sc.num_kv_heads = model->num_local_kv_heads();
  sc.head_dim = model->config().head_dim;
  sc.dtype = model->kv_dtype();
  auto storage = kv::KvStorage::Create(sc);
  CHECK(storage.ok(), "%s", storage.status().ToString());

  std::vector<std::vector<BlockId>> tables(num_seqs);
  for (int s = 0; s < num_seqs; ++s) {
    for (int b = 0; b < kBlocksPerSeq; ++b) tables[s].push_back(BlockId(s * kBlocksPerSeq + b));
  }
  std::vector<int32_t> length(num_seqs, 0);
  std::vector<std::vector<int32_t>> pending(num_seqs);  // tokens to compute next step
  Trace trace;
  trace.tokens.resize(num_seqs);
  const int32_t vocab = model->config().vocab_size;
  trace.vocab = vocab;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<ForwardSequence> batch;
    std::vector<int> seq_of;
    for (int s = 0; s < num_seqs; ++s) {
      if (step < kJoinStep[s]) continue;
      if (step == kJoinStep[s]) pending[s] = Prompts()[s];
      ForwardSequence f;
      f.tokens = pending[s];
      f.start_pos = length[s];
      f.block_table = tables[s];
      f.num_logits = 1;
      batch.push_back(f);
      seq_of.push_back(s);
    }
    std::vector<float> logits(rank == 0 ? batch.size() * vocab : 0);
    absl::Status st = model->Forward(batch, **storage, rank == 0 ? logits.data() : nullptr);
    CHECK(st.ok(), "%s", st.ToString());
    std::string next(batch.size() * sizeof(int32_t), '\0');
    if (rank == 0) {
      for (size_t i = 0; i < batch.size(); ++i) {
        int32_t t = Argmax(logits.data() + i * vocab, vocab);
        std::memcpy(next.data() + i * sizeof(int32_t), &t, sizeof(t));
      }
      trace.logits.push_back(std::move(logits));
    }
    if (world_size > 1) CHECK(comm->Broadcast(&next, 0).ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      const int s = seq_of[i];
      int32_t t;
      std::memcpy(&t, next.data() + i * sizeof(int32_t), sizeof(t));
      trace.tokens[s].push_back(t);
      if (forced != nullptr) t = forced->tokens[s][trace.tokens[s].size() - 1];
      length[s] += static_cast<int32_t>(pending[s].size());
      pending[s] = {t};
    }
  }
  return trace;
}

Trace RunTp(Precision precision, int world_size, const Trace* forced = nullptr) {
  if (world_size == 1) return RunRank(precision, 0, 1, nullptr, forced);
  parallel::ThreadWorld world(world_size);
  std::vector<std::unique_ptr<parallel::Communicator>> comms = world.MakeCommunicators();
  std::vector<Trace> traces(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] { traces[r] = RunRank(precision, r, world_size, comms[r].get(), forced); });
  }
  for (std::thread& t : threads) t.join();
  // Every rank saw the same broadcast tokens.
  for (int r = 1; r < world_size; ++r) EXPECT_EQ(traces[r].tokens, traces[0].tokens);
  return traces[0];
}

float MaxAbsDiff(const Trace& a, const Trace& b) {
  float diff = 0;
  for (size_t s = 0; s < a.logits.size(); ++s) {
    for (size_t i = 0; i < a.logits[s].size(); ++i) {
      diff = std::max(diff, std::abs(a.logits[s][i] - b.logits[s][i]));
    }
  }
  return diff;
}

// The fp32 summation order of the wo / w_down partials changes with the
// split, so logits are equal up to rounding only. In reference precision
// (f32 weights and activations) that rounding stays ~1e-5 over 30 layers and
// 32 greedy steps: the tokens must be identical.
TEST(ModelTpTest, ReferencePrecisionGreedyTokensMatchSingleRank) {
  const Trace single = RunTp(Precision::kReference, 1);
  for (int world_size : {2, 3}) {
    SCOPED_TRACE(absl::StrFormat("TP=%d", world_size));
    const Trace tp = RunTp(Precision::kReference, world_size);
    EXPECT_EQ(tp.tokens, single.tokens);
    const float diff = MaxAbsDiff(tp, single);
    std::printf("reference TP=%d vs TP=1: max |logit diff| over %d steps = %g\n", world_size,
                kSteps, diff);
    EXPECT_LT(diff, 1e-3f);
  }
}

// Fast precision quantizes every activation to 8 bits per block of 32, and
// SmolLM2's outlier channels make that lossy: a rounding-level change in the
// residual stream flips some int8 roundings, which then move logits by up to
// ~1 (the same size as between the reference / AVX2 / AVX-512 kernels, see
// ModelTest.ReferencePrecisionCloseToFast, which allows 3). So fast-mode
// greedy tokens can flip at near-ties, as they can between ISAs. Checked with
// teacher forcing (every run is fed TP=1's tokens): logits within 3 at every
// step, and a different argmax only where TP=1's top-2 margin is below 1.
TEST(ModelTpTest, FastPrecisionCloseToSingleRank) {
  const Trace single = RunTp(Precision::kFast, 1);
  for (int world_size : {2, 3}) {
    SCOPED_TRACE(absl::StrFormat("TP=%d", world_size));
    const Trace tp = RunTp(Precision::kFast, world_size, &single);
    ASSERT_EQ(tp.logits.size(), single.logits.size());
    const float diff = MaxAbsDiff(tp, single);
    int rows = 0, flips = 0;
    for (size_t step = 0; step < single.logits.size(); ++step) {
      const int32_t vocab = single.vocab;
      const size_t n = single.logits[step].size() / vocab;
      for (size_t i = 0; i < n; ++i, ++rows) {
        const float* a = single.logits[step].data() + i * vocab;
        const float* b = tp.logits[step].data() + i * vocab;
        const int32_t top = Argmax(a, vocab);
        if (Argmax(b, vocab) == top) continue;
        ++flips;
        std::vector<float> sorted(a, a + vocab);
        std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<>());
        const float margin = sorted[0] - sorted[1];
        std::printf("  step %zu row %zu: argmax flip at TP=1 top-2 margin %.4f\n", step, i, margin);
        EXPECT_LT(margin, 1.0f) << "step " << step << " row " << i;
      }
    }
    std::printf("fast TP=%d vs TP=1 (teacher-forced, %d steps): max |logit diff| = %g, "
                "argmax flips %d of %d rows\n",
                world_size, kSteps, diff, flips, rows);
    EXPECT_LT(diff, 3.0f);
  }
}

TEST(ModelTpTest, LoadRejectsMissingOrMismatchedCommunicator) {
  ModelOptions options;
  options.tp_rank = 0;
  options.tp_world_size = 2;
  auto no_comm = Model::Load(testing::DefaultModelPath(), options);
  EXPECT_EQ(no_comm.status().code(), absl::StatusCode::kInvalidArgument) << no_comm.status();
  parallel::SingleProcessCommunicator single;
  options.communicator = &single;
  auto mismatch = Model::Load(testing::DefaultModelPath(), options);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument) << mismatch.status();
  options.tp_world_size = 4;  // SmolLM2-135M has 3 KV heads
  auto too_many = Model::Load(testing::DefaultModelPath(), options);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument) << too_many.status();
}

TEST(ModelTpTest, ForwardRejectsKvStorageOfTheWrongWidth) {
  parallel::ThreadWorld world(2);
  parallel::ThreadCommunicator comm(&world, 1);
  ModelOptions options;
  options.num_threads = 1;
  options.tp_rank = 1;
  options.tp_world_size = 2;
  options.communicator = &comm;
  auto model = Model::Load(testing::DefaultModelPath(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_local_kv_heads(), 1);
  kv::KvStorageConfig sc;
  sc.num_layers = (*model)->config().num_layers;
  sc.num_blocks = 1;
  sc.block_size = kBlockSize;
  sc.num_kv_heads = (*model)->config().num_kv_heads;  // all 3: wrong for a shard
  sc.head_dim = (*model)->config().head_dim;
  sc.dtype = (*model)->kv_dtype();
  auto storage = kv::KvStorage::Create(sc);
  ASSERT_TRUE(storage.ok());
  const std::vector<int32_t> tokens = {1};
  const std::vector<BlockId> table = {BlockId(0)};
  ForwardSequence f{tokens, 0, table, 1};
  absl::Status st = (*model)->Forward({&f, 1}, **storage, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

}  // namespace
}  // namespace tandem::model
