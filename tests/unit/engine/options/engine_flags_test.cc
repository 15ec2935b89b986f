// EngineOptionsFromFlags: the engine flags into the model's and the runner's
// options, each bad value an error naming the flag and its limit, and a
// binary's own defaults (SetEngineFlagDefaults) in effect until a flag is given.
#include "engine/options/engine_flags.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

// Every test starts from the library's defaults.
class EngineFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_threads, 0);
    absl::SetFlag(&FLAGS_precision, "fast");
    absl::SetFlag(&FLAGS_block_size, 16);
    absl::SetFlag(&FLAGS_kv_blocks, 0);
    SetEngineFlagDefaults({});
    absl::SetFlag(&FLAGS_device, "cpu");
    absl::SetFlag(&FLAGS_cuda_weights, "bf16");
    absl::SetFlag(&FLAGS_cuda_sampling, "device");
    absl::SetFlag(&FLAGS_cuda_graphs, true);
    absl::SetFlag(&FLAGS_gpus, "");
  }
};

TEST_F(EngineFlagsTest, TheFlagsBecomeTheModelAndRunnerOptions) {
  absl::SetFlag(&FLAGS_threads, 3);
  absl::SetFlag(&FLAGS_precision, "reference");
  absl::SetFlag(&FLAGS_block_size, 32);
  absl::SetFlag(&FLAGS_kv_blocks, 100);
  absl::StatusOr<EngineOptions> e = EngineOptionsFromFlags({.max_batched_tokens = 512});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->model.num_threads, 3);
  EXPECT_EQ(e->model.precision, model::Precision::kReference);
  EXPECT_EQ(e->precision, "reference");
  EXPECT_TRUE(e->model.cpu_weights);  // the CPU runs the model
  const device::RunnerOptions runner = e->Runner();
  EXPECT_EQ(runner.device, device::Device::kCpu);
  EXPECT_EQ(runner.block_size, 32);
  EXPECT_EQ(runner.kv_blocks, 100);
  EXPECT_EQ(runner.kv_cache_bytes, 512ll << 20);
  EXPECT_EQ(runner.cuda.max_batched_tokens, 512);
}

TEST_F(EngineFlagsTest, CudaSettingsComeFromTheirFlags) {
  absl::SetFlag(&FLAGS_device, "cuda");
  absl::SetFlag(&FLAGS_cuda_weights, "native");
  absl::SetFlag(&FLAGS_cuda_sampling, "host");
  absl::SetFlag(&FLAGS_cuda_graphs, false);
  absl::SetFlag(&FLAGS_gpus, "2,0");
  absl::StatusOr<EngineOptions> e = EngineOptionsFromFlags({});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->device.device, device::Device::kCuda);
  EXPECT_FALSE(e->model.cpu_weights);
  EXPECT_EQ(e->device.cuda.weights, device::CudaWeights::kNative);
  EXPECT_FALSE(e->device.cuda.sample_on_device);
  EXPECT_FALSE(e->device.cuda.cuda_graphs);
  EXPECT_EQ(e->device.cuda.gpus, (std::vector<int>{2, 0}));
  EXPECT_DOUBLE_EQ(e->device.cuda.gpu_memory_fraction, 0.9);
}

TEST_F(EngineFlagsTest, ARoleSetsItsDefaultsUntilAFlagIsGiven) {
  const EngineRole draft{.default_kv_cache_bytes = 256ll << 20,
                         .default_gpu_memory_fraction = 0.2,
                         .host_sampling_only = true};
  SetEngineFlagDefaults(draft);
  absl::SetFlag(&FLAGS_device, "cuda");
  absl::StatusOr<EngineOptions> e = EngineOptionsFromFlags(draft);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kv_cache_bytes, 256ll << 20);
  EXPECT_DOUBLE_EQ(e->device.cuda.gpu_memory_fraction, 0.2);
  EXPECT_FALSE(e->device.cuda.sample_on_device);  // --cuda-sampling device, yet on the host
  absl::SetFlag(&FLAGS_kv_cache_bytes, 64ll << 20);  // as the command line would
  e = EngineOptionsFromFlags(draft);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kv_cache_bytes, 64ll << 20);
}

TEST_F(EngineFlagsTest, BadValuesNameTheFlagAndTheLimit) {
  struct Case {
    std::function<void()> set;
    std::string want;
  };
  const Case cases[] = {
      {[] { absl::SetFlag(&FLAGS_threads, -1); }, "--threads -1 is negative: must be >= 0"},
      {[] { absl::SetFlag(&FLAGS_precision, "half"); },
       "--precision 'half' must be fast or reference"},
      {[] { absl::SetFlag(&FLAGS_block_size, 0); },
       "--block-size 0 is out of range: must be in [1, 1024]"},
      {[] { absl::SetFlag(&FLAGS_block_size, 1025); },
       "--block-size 1025 is out of range: must be in [1, 1024]"},
      {[] { absl::SetFlag(&FLAGS_device, "tpu"); }, "tpu"},
      {[] { absl::SetFlag(&FLAGS_cuda_sampling, "gpu"); }, "--cuda-sampling 'gpu'"},
      {[] { absl::SetFlag(&FLAGS_gpus, "0,x"); }, "x"},
  };
  for (const Case& c : cases) {
    SetUp();
    c.set();
    absl::StatusOr<EngineOptions> e = EngineOptionsFromFlags({});
    ASSERT_FALSE(e.ok()) << c.want;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_NE(e.status().message().find(c.want), std::string::npos) << e.status();
  }
}

TEST_F(EngineFlagsTest, CudaLimitsAreCheckedOnlyForCuda) {
  absl::SetFlag(&FLAGS_gpu_memory_fraction, 1.5);
  EXPECT_TRUE(EngineOptionsFromFlags({}).ok());  // the CPU does not use it
  absl::SetFlag(&FLAGS_device, "cuda");
  absl::StatusOr<EngineOptions> e = EngineOptionsFromFlags({});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--gpu-memory-fraction"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace tandem::engine
