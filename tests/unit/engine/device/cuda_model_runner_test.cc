// CudaModelRunner under the CUDA emulator against the CPU Model on the model
// at $TANDEM_MODEL (CTest: the generated tiny model, tests/CMakeLists.txt): the same batches through both (prefill chunks past the GEMV
// limit, decode steps, mixed steps), copy-on-write forks, the allocation
// counter, capacity errors and KV sizing from the memory fraction.
#include "engine/device/cuda_model_runner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "engine/model/cpu_model_runner.h"
#include "gtest/gtest.h"
#include "kernels/cuda/gemm/gemv.cuh"
#include "tests/unit/engine/device/runner_test_util.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::device {
namespace {

using model::ForwardSequence;
using model::Model;

std::unique_ptr<Model> LoadModel(bool cpu_weights) {
  model::ModelOptions options;
  options.precision = model::Precision::kReference;  // f32 KV on both sides
  options.cpu_weights = cpu_weights;
  auto m = Model::Load(testing::DefaultModelPath(), options);
  CHECK(m.ok(), "%s", m.status().ToString());
  return *std::move(m);
}

// The models are shared by every test: loading and uploading cost seconds
// under emulation.
Model& CpuModel() {
  static Model* m = LoadModel(true).release();
  return *m;
}
Model& DeviceModel() {
  static Model* m = LoadModel(false).release();
  return *m;
}

std::unique_ptr<CudaModelRunner> MakeRunner(CudaWeights weights, int32_t max_tokens = 64,
                                            bool cuda_graphs = true) {
  CudaOptions options;
  options.weights = weights;
  options.max_batched_tokens = max_tokens;
  options.cuda_graphs = cuda_graphs;
  auto r = CudaModelRunner::Create(&DeviceModel(), options);
  CHECK(r.ok(), "%s", r.status().ToString());
  CHECK((*r)->ResetKvCache(32, 16).ok());
  return *std::move(r);
}

// Prefill (17 tokens: the GEMM path), a decode step (GEMVs, the decode
// attention kernel) and a mixed step (the prefill kernel after cached
// positions), through the CPU reference and the device.
void CompareSteps(CudaWeights weights, float tol) {
  auto device = MakeRunner(weights);
  model::CpuModelRunner cpu(&CpuModel());
  ASSERT_TRUE(cpu.ResetKvCache(32, 16).ok());
  const int32_t vocab = CpuModel().config().vocab_size;
  const std::vector<std::vector<Seq>> steps = {
      {{Tokens(12, 1), 0, Blocks({0}), 1}, {Tokens(5, 2), 0, Blocks({1}), 5}},
      {{Tokens(1, 3), 12, Blocks({0}), 1}, {Tokens(1, 4), 5, Blocks({1}), 1}},
      {{Tokens(1, 5), 13, Blocks({0}), 1}, {Tokens(3, 6), 6, Blocks({1}), 2}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "step " << i);
    ExpectClose(Forward(*device, steps[i]), Forward(cpu, steps[i]), vocab, tol);
  }
}

TEST(CudaModelRunnerTest, NativeWeightsMatchTheCpuReference) {
  ASSERT_NO_FATAL_FAILURE(CompareSteps(CudaWeights::kNative, 1e-4f));
}

TEST(CudaModelRunnerTest, Bf16WeightsStayNearTheCpuReference) {
  ASSERT_NO_FATAL_FAILURE(CompareSteps(CudaWeights::kBf16, 5e-2f));
}

// Prompts over several KV blocks and query tiles, one sequence at a time.
TEST(CudaModelRunnerTest, LongPromptsMatchTheCpuReference) {
  auto device = MakeRunner(CudaWeights::kNative);
  model::CpuModelRunner cpu(&CpuModel());
  ASSERT_TRUE(cpu.ResetKvCache(32, 16).ok());
  const int32_t vocab = CpuModel().config().vocab_size;
  for (int32_t len : {9, 16, 17, 28}) {
    SCOPED_TRACE(::testing::Message() << "prompt of " << len);
    const std::vector<Seq> prefill = {{Tokens(len, len), 0, Blocks({4, 5}), 1}};
    ExpectClose(Forward(*device, prefill), Forward(cpu, prefill), vocab, 1e-4f);
    const std::vector<Seq> decode = {{Tokens(1, len + 1), len, Blocks({4, 5}), 1}};
    ExpectClose(Forward(*device, decode), Forward(cpu, decode), vocab, 1e-4f);
  }
}

TEST(CudaModelRunnerTest, ForkedBlocksGiveTheSameLogits) {
  auto device = MakeRunner(CudaWeights::kNative);
  const int32_t vocab = DeviceModel().config().vocab_size;
  Forward(*device, {{Tokens(20, 7), 0, Blocks({0, 1}), 1}});
  // Copy-on-write: the fork's second block is a copy of block 1.
  const kv::BlockCopy copy{BlockId(1), BlockId(5)};
  ASSERT_TRUE(device->CopyBlocks({&copy, 1}).ok());
  const std::vector<float> both = Forward(
      *device, {{Tokens(1, 8), 20, Blocks({0, 1}), 1}, {Tokens(1, 8), 20, Blocks({0, 5}), 1}});
  EXPECT_TRUE(std::equal(both.begin(), both.begin() + vocab, both.begin() + vocab));
}

TEST(CudaModelRunnerTest, StepsAllocateNoDeviceMemory) {
  auto device = MakeRunner(CudaWeights::kNative);
  const int64_t before = cuda::DeviceAllocationCount();
  Forward(*device, {{Tokens(18, 9), 0, Blocks({2, 3}), 18}});
  const kv::BlockCopy copy{BlockId(3), BlockId(4)};
  ASSERT_TRUE(device->CopyBlocks({&copy, 1}).ok());
  Forward(*device, {{Tokens(1, 10), 18, Blocks({2, 3}), 1}, {Tokens(1, 10), 18, Blocks({2, 4}), 1}});
  EXPECT_EQ(cuda::DeviceAllocationCount(), before);
}

// The device's beam candidates are the CPU's: tokens in order, scores and
// keys within 1e-5.
void ExpectSameCandidates(const sampling::SampleResult& got, const sampling::SampleResult& cpu) {
  ASSERT_EQ(got.beam_candidates.size(), cpu.beam_candidates.size());
  for (size_t j = 0; j < cpu.beam_candidates.size(); ++j) {
    const sampling::BeamToken& g = got.beam_candidates[j];
    EXPECT_EQ(g.token, cpu.beam_candidates[j].token) << "candidate " << j;
    EXPECT_NEAR(g.score, cpu.beam_candidates[j].score, 1e-5) << "candidate " << j;
    EXPECT_NEAR(g.key, cpu.beam_candidates[j].key, 1e-5) << "candidate " << j;
  }
}

// ForwardSample against Forward + the CPU Sampler on the same rows: 70
// logits rows (two chunks of the device logits buffer), greedy and seeded
// rows in both chunks and out of order, a beam row and a beam-sampling row
// ranked on the device, and a row with more min-tokens mask ids than the
// device takes, left to the host with its logits copied.
TEST(CudaModelRunnerTest, ForwardSampleEqualsTheCpuSampler) {
  // bf16 weights: the head needs no dequantization per call (the reference
  // is this runner's own Forward, so the precision does not matter here).
  auto device = MakeRunner(CudaWeights::kBf16, /*max_tokens=*/128);
  ASSERT_TRUE(device->samples_on_device());
  const int32_t vocab = DeviceModel().config().vocab_size;
  const std::vector<Seq> step = {{Tokens(70, 12), 0, Blocks({0, 1, 2, 3, 4}), 70}};
  const std::vector<float> logits = Forward(*device, step);
  sampling::SamplingParams greedy, sampled, beam, beam_sampled, many_stops;
  greedy.temperature = 0.0f;
  sampled.temperature = 0.9f;
  sampled.top_p = 0.95f;
  sampled.repetition_penalty = 1.1f;
  beam.temperature = 0.0f;
  beam.beam_candidates = 8;
  beam.repetition_penalty = 1.2f;
  beam_sampled.beam_candidates = 4;
  beam_sampled.beam_sample = true;
  beam_sampled.temperature = 0.8f;
  beam_sampled.top_k = 20;
  many_stops.temperature = 0.7f;
  many_stops.min_tokens = 50;
  for (int32_t id = 0; id < 65; ++id) many_stops.stop_token_ids.push_back(id + 1);
  const std::vector<int32_t> history = Tokens(6, 13);
  const std::vector<int64_t> logit_rows = {69, 3, 66, 0, 50, 41, 40};
  const sampling::SamplingParams* params[] = {&sampled, &greedy,       &greedy,    &sampled,
                                              &beam,    &beam_sampled, &many_stops};
  std::vector<sampling::SamplingRow> rows;
  for (size_t i = 0; i < logit_rows.size(); ++i) {
    rows.push_back({.logits = logits.data() + logit_rows[i] * vocab,
                    .params = params[i],
                    .output_tokens = std::span(history).first(i),
                    .seed = 100 + i});
  }
  std::vector<sampling::SampleResult> cpu(rows.size());
  sampling::Sampler(vocab).SampleBatch(rows, cpu, nullptr);

  std::vector<ForwardSequence> batch;
  for (const Seq& s : step) batch.push_back({s.tokens, s.start_pos, s.table, s.num_logits});
  std::vector<float> host_logits(logits.size(), 0.0f);
  std::vector<sampling::SampleResult> got(rows.size());
  std::vector<int32_t> host_rows;
  const int64_t allocations = cuda::DeviceAllocationCount();
  ASSERT_TRUE(
      device->ForwardSample(batch, logit_rows, rows, got, host_logits.data(), &host_rows).ok());
  EXPECT_EQ(cuda::DeviceAllocationCount(), allocations);
  EXPECT_EQ(host_rows, std::vector<int32_t>{6});
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(got[i].token, cpu[i].token) << "row " << i;
    EXPECT_NEAR(got[i].logprob, cpu[i].logprob, 1e-5) << "row " << i;
  }
  for (size_t r : {4u, 5u}) {
    SCOPED_TRACE(::testing::Message() << "row " << r);
    ExpectSameCandidates(got[r], cpu[r]);
  }
  EXPECT_EQ(got[4].beam_candidates.size(), 8u);
  EXPECT_EQ(got[5].beam_candidates.size(), 4u);
  EXPECT_EQ(got[6].token, -1);
  // The host row's logits were copied, and only they.
  EXPECT_TRUE(std::equal(logits.begin() + 40 * vocab, logits.begin() + 41 * vocab,
                         host_logits.begin() + 40 * vocab));
  EXPECT_EQ(host_logits[0], 0.0f);
}

// Decode steps of `num_seqs` sequences at positions 0, 1 and 2 on blocks
// first_block.., logits at the third only (it reads the KV the first two
// wrote).
std::vector<std::vector<Seq>> RepeatedDecodeSteps(int32_t num_seqs, int32_t first_block) {
  std::vector<std::vector<Seq>> steps;
  for (int32_t k = 0; k < 3; ++k) {
    std::vector<Seq> step;
    for (int32_t s = 0; s < num_seqs; ++s) {
      step.push_back({Tokens(1, 20 + 10 * s + k), k, Blocks({first_block + s}), k == 2 ? 1 : 0});
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

// Decode graphs: the same steps with graphs and without give bit-identical
// logits; a decode shape's first step runs directly, its second is captured,
// the third replays the graph with the next positions and tokens — for 2
// sequences (GEMVs) and for 9 (past kMaxGemvBatch: the GEMMs are captured);
// another shape seen once takes no graph; a KV reset drops the graphs.
TEST(CudaModelRunnerTest, DecodeGraphsReplayTheDirectLaunches) {
  auto graphs = MakeRunner(CudaWeights::kNative);
  auto eager = MakeRunner(CudaWeights::kNative, 64, /*cuda_graphs=*/false);
  static_assert(cuda::kMaxGemvBatch < 9);
  std::vector<std::vector<Seq>> steps = RepeatedDecodeSteps(2, 0);
  for (std::vector<Seq>& step : RepeatedDecodeSteps(9, 2)) steps.push_back(std::move(step));
  steps.push_back({{Tokens(1, 40), 0, Blocks({11}), 1}});  // one sequence: a new shape
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "step " << i);
    EXPECT_EQ(Forward(*graphs, steps[i]), Forward(*eager, steps[i]));
  }
  EXPECT_EQ(graphs->decode_graphs().num_captures(), 2);
  EXPECT_EQ(graphs->decode_graphs().num_replays(), 2);
  EXPECT_EQ(graphs->decode_graphs().num_graphs(), 2);
  EXPECT_EQ(eager->decode_graphs().num_graphs(), 0);
  ASSERT_TRUE(graphs->ResetKvCache(32, 16).ok());
  EXPECT_EQ(graphs->decode_graphs().num_graphs(), 0);
}

TEST(CudaModelRunnerTest, RejectsABatchPastItsCapacity) {
  auto device = MakeRunner(CudaWeights::kNative, /*max_tokens=*/16);
  const std::vector<int32_t> tokens = Tokens(17, 11);
  const std::vector<BlockId> table = Blocks({0, 1});
  const ForwardSequence s{tokens, 0, table, 1};
  std::vector<float> logits(DeviceModel().config().vocab_size);
  absl::Status status = device->Forward({&s, 1}, logits.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("17 tokens"), std::string::npos) << status;
  EXPECT_NE(status.message().find("16"), std::string::npos) << status;
}

TEST(CudaModelRunnerTest, ForwardNeedsACache) {
  auto device = MakeRunner(CudaWeights::kNative);
  EXPECT_FALSE(device->ResetKvCache(0, 16).ok());
  const std::vector<int32_t> tokens = Tokens(1, 12);
  const std::vector<BlockId> table = Blocks({0});
  const ForwardSequence s{tokens, 0, table, 1};
  std::vector<float> logits(DeviceModel().config().vocab_size);
  EXPECT_EQ(device->Forward({&s, 1}, logits.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CudaModelRunnerTest, SizesTheCacheFromTheMemoryFraction) {
  CudaOptions options;
  options.weights = CudaWeights::kNative;
  options.max_batched_tokens = 16;
  auto device = *CudaModelRunner::Create(&DeviceModel(), options);
  const cuda::DeviceMemoryInfo info = *cuda::QueryDeviceMemory();
  const model::ModelConfig& c = DeviceModel().config();
  const int64_t per_block = 2 * int64_t{c.num_layers} * 16 * c.num_kv_heads * c.head_dim * 4;
  const int64_t used = info.total_bytes - info.free_bytes;
  const double fraction = 0.5;
  EXPECT_EQ(*device->NumKvBlocksForMemoryFraction(fraction, 16),
            (static_cast<int64_t>(fraction * info.total_bytes) - used) / per_block);
  absl::StatusOr<int32_t> none = device->NumKvBlocksForMemoryFraction(1e-6, 16);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("--gpu-memory-fraction"), std::string::npos);
}

TEST(CudaModelRunnerTest, RejectsBadOptions) {
  CudaOptions options;
  options.gpu_memory_fraction = 1.5;
  absl::StatusOr<std::unique_ptr<CudaModelRunner>> r =
      CudaModelRunner::Create(&DeviceModel(), options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("1.5"), std::string::npos);
}

}  // namespace
}  // namespace tandem::device
