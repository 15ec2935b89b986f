// Tensor parallelism on the device under the CUDA emulator: TP = 2 (the
// model's 3 KV heads split 2 + 1) and TP = 3, one thread and one
// CudaModelRunner per rank joined by ThreadCommunicator (the device
// all-reduce's in-process stand-in), against the CPU Model at TP = 1 in
// reference precision over prefill, decode and mixed steps. Also: device
// selection by local rank and --gpus, and the errors of both.
#include <memory>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "engine/device/cuda_model_runner.h"
#include "engine/device/device_communicator.h"
#include "engine/device/device_options.h"
#include "engine/model/cpu_model_runner.h"
#include "engine/parallel/thread_communicator.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/device/runner_test_util.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::device {
namespace {

std::unique_ptr<Model> LoadShard(int rank, int world, parallel::Communicator* comm,
                                 bool cpu_weights) {
  model::ModelOptions options;
  options.precision = model::Precision::kReference;
  options.cpu_weights = cpu_weights;
  options.num_threads = 1;
  options.tp_rank = rank;
  options.tp_world_size = world;
  options.communicator = world > 1 ? comm : nullptr;
  auto m = Model::Load(testing::DefaultModelPath(), options);
  CHECK(m.ok(), "%s", m.status().ToString());
  return *std::move(m);
}

// Prefill (12 tokens and 5 with logits on every row), a decode step and a
// mixed step (a decode beside a 3-token chunk after cached positions).
const std::vector<std::vector<Seq>>& Steps() {
  static const auto* steps = new std::vector<std::vector<Seq>>{
      {{Tokens(12, 1), 0, Blocks({0}), 1}, {Tokens(5, 2), 0, Blocks({1}), 5}},
      {{Tokens(1, 3), 12, Blocks({0}), 1}, {Tokens(1, 4), 5, Blocks({1}), 1}},
      {{Tokens(1, 5), 13, Blocks({0}), 1}, {Tokens(3, 6), 6, Blocks({1}), 2}},
  };
  return *steps;
}

struct GroupRun {
  std::vector<std::vector<float>> rank0_logits;  // per step
  int64_t rank0_captures = 0;                    // decode graphs of rank 0
  int64_t rank0_replays = 0;
};

// Every step's logits from rank 0 of a device group of `world` ranks (the
// other ranks run the same steps without the head, as tandem-worker's do).
GroupRun RunDeviceGroup(int world, const std::vector<std::vector<Seq>>& steps,
                        bool cuda_graphs = true) {
  parallel::ThreadWorld thread_world(world);
  std::vector<std::unique_ptr<parallel::Communicator>> comms = thread_world.MakeCommunicators();
  GroupRun run;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Model> shard = LoadShard(r, world, comms[r].get(), /*cpu_weights=*/false);
      CudaOptions options;
      options.weights = CudaWeights::kNative;
      options.max_batched_tokens = 64;
      options.cuda_graphs = cuda_graphs;
      auto runner = CudaModelRunner::Create(shard.get(), options);
      CHECK(runner.ok(), "%s", runner.status().ToString());
      CHECK((*runner)->ResetKvCache(8, 16).ok());
      for (const std::vector<Seq>& step : steps) {
        if (r == 0) {
          run.rank0_logits.push_back(Forward(**runner, step));
        } else {
          std::vector<ForwardSequence> batch;
          for (const Seq& s : step) batch.push_back({s.tokens, s.start_pos, s.table, s.num_logits});
          absl::Status status = (*runner)->Forward(batch, nullptr);
          CHECK(status.ok(), "%s", status.ToString());
        }
      }
      if (r == 0) {
        run.rank0_captures = (*runner)->decode_graphs().num_captures();
        run.rank0_replays = (*runner)->decode_graphs().num_replays();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

void CompareWithCpu(int world) {
  std::unique_ptr<Model> cpu_model = LoadShard(0, 1, nullptr, /*cpu_weights=*/true);
  model::CpuModelRunner cpu(cpu_model.get());
  ASSERT_TRUE(cpu.ResetKvCache(8, 16).ok());
  const std::vector<std::vector<float>> device = RunDeviceGroup(world, Steps()).rank0_logits;
  ASSERT_EQ(device.size(), Steps().size());
  for (size_t i = 0; i < Steps().size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "TP " << world << " step " << i);
    ExpectClose(device[i], Forward(cpu, Steps()[i]), cpu_model->config().vocab_size, 1e-4f);
  }
}

TEST(CudaTpTest, TwoRanksWithAnUnevenKvHeadSplitMatchTheCpu) {
  ASSERT_NO_FATAL_FAILURE(CompareWithCpu(2));
}

TEST(CudaTpTest, ThreeRanksMatchTheCpu) { ASSERT_NO_FATAL_FAILURE(CompareWithCpu(3)); }

// Decode graphs at TP 2: three decode steps of two sequences after their
// prefill; the third replays the graph captured at the second, all-reduces
// included, and every step's logits equal the group's without graphs bit
// for bit.
TEST(CudaTpTest, DecodeGraphsHoldTheAllReduces) {
  std::vector<std::vector<Seq>> steps = {
      {{Tokens(4, 1), 0, Blocks({0}), 1}, {Tokens(6, 2), 0, Blocks({1}), 1}}};
  for (int32_t k = 0; k < 3; ++k) {
    steps.push_back({{Tokens(1, 10 + k), 4 + k, Blocks({0}), 1},
                     {Tokens(1, 20 + k), 6 + k, Blocks({1}), 1}});
  }
  const GroupRun graphs = RunDeviceGroup(2, steps);
  const GroupRun eager = RunDeviceGroup(2, steps, /*cuda_graphs=*/false);
  EXPECT_EQ(graphs.rank0_captures, 1);
  EXPECT_EQ(graphs.rank0_replays, 1);
  EXPECT_EQ(eager.rank0_captures, 0);
  ASSERT_EQ(graphs.rank0_logits.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(graphs.rank0_logits[i], eager.rank0_logits[i]) << "step " << i;
  }
}

// One device listed for two ranks: rank 1 (local rank 1: no MPI here) has
// none and fails; rank 0 learns it before joining the device communicator,
// so both return instead of rank 0 waiting for ever.
TEST(CudaTpTest, ARankWithoutADeviceFailsTheWholeGroup) {
  parallel::ThreadWorld world(2);
  std::vector<std::unique_ptr<parallel::Communicator>> comms = world.MakeCommunicators();
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Model> shard = LoadShard(r, 2, comms[r].get(), /*cpu_weights=*/false);
      CudaOptions options;
      options.max_batched_tokens = 16;
      options.gpus = {0};
      status[r] = CudaModelRunner::Create(shard.get(), options).status();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(status[1].code(), absl::StatusCode::kInvalidArgument) << status[1];
  EXPECT_NE(status[1].message().find("--gpus 0 lists 1 devices"), std::string::npos) << status[1];
  EXPECT_EQ(status[0].code(), absl::StatusCode::kUnavailable) << status[0];
  EXPECT_NE(status[0].message().find("another rank"), std::string::npos) << status[0];
}

TEST(DeviceSelectionTest, LocalRankOrGpusPickTheOrdinal) {
  EXPECT_EQ(DeviceOrdinalFor({}, 0, 8).value(), 0);
  EXPECT_EQ(DeviceOrdinalFor({}, 3, 8).value(), 3);
  EXPECT_EQ(DeviceOrdinalFor({4, 6}, 1, 8).value(), 6);
  EXPECT_EQ(DeviceOrdinalFor({}, 3, 1).value(), 0);  // one visible device per rank
  absl::StatusOr<int> past = DeviceOrdinalFor({}, 2, 2);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("device 2, but this node has 2"), std::string::npos)
      << past.status();
  EXPECT_EQ(DeviceOrdinalFor({9}, 0, 8).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceSelectionTest, ParseGpus) {
  EXPECT_EQ(ParseGpus("").value(), std::vector<int>{});
  EXPECT_EQ(ParseGpus("2,0,1").value(), (std::vector<int>{2, 0, 1}));
  for (const char* bad : {"0,,1", "x", "-1", "1024", "1,1"}) {
    absl::StatusOr<std::vector<int>> gpus = ParseGpus(bad);
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(gpus.status().message().find(bad), std::string::npos) << gpus.status();
  }
}

}  // namespace
}  // namespace tandem::device
