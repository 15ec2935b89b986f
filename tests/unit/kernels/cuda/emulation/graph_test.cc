// CUDA graphs under emulation: a capture records launches and async copies
// instead of running them; a launched graph re-runs them in order, reading
// what device memory holds at launch (a changed input changes the output);
// parameters are copied at capture. Capture errors as on a GPU: the legacy
// stream, a second BeginCapture, EndCapture without one, synchronizing a
// capturing stream (which invalidates the capture). Recorded host work: a
// failing operation stops the replay and is the launch's error.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

__global__ void AddScaled(const float* x, float scale, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += scale * x[i];
}

class GraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cudaGetLastError();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override { EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess); }

  cudaStream_t stream_ = nullptr;
};

TEST_F(GraphTest, ReplaysWhatWasCapturedOnCurrentMemory) {
  constexpr int kN = 100;
  DeviceBuffer<float> x(std::vector<float>(kN, 1.0f));
  DeviceBuffer<float> y(std::vector<float>(kN, 0.0f));
  std::vector<float> staged(kN, 0.0f);
  float scale = 2.0f;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  // Stage x from the host, then y += scale * x, twice.
  ASSERT_EQ(cudaMemcpyAsync(x.get(), staged.data(), kN * sizeof(float), cudaMemcpyHostToDevice,
                            stream_),
            cudaSuccess);
  TANDEM_LAUNCH(AddScaled, 1, 128, 0, stream_, x.get(), scale, y.get(), kN);
  TANDEM_LAUNCH(AddScaled, 1, 128, 0, stream_, x.get(), scale, y.get(), kN);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  scale = 100.0f;  // captured by value: the graph keeps 2
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(y.Download(), std::vector<float>(kN, 0.0f)) << "a capture runs nothing";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  staged.assign(kN, 3.0f);  // read at launch, not at capture
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(y.Download(), std::vector<float>(kN, 12.0f));
  staged.assign(kN, 0.5f);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(y.Download(), std::vector<float>(kN, 14.0f));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

TEST_F(GraphTest, CaptureErrorsAsOnAGpu) {
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorIllegalState);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  // Waiting for a capturing stream cannot work: the capture is invalidated.
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  // The stream works normally again.
  DeviceBuffer<float> y(std::vector<float>(4, 1.0f));
  ASSERT_EQ(cudaMemsetAsync(y.get(), 0, 4 * sizeof(float), stream_), cudaSuccess);
  EXPECT_EQ(y.Download(), std::vector<float>(4, 0.0f));
  cudaGetLastError();
}

TEST_F(GraphTest, AFailingRecordedOperationStopsTheReplay) {
  std::vector<int> ran;
  EXPECT_FALSE(RecordIfCapturing(stream_, [&] { return cudaSuccess; })) << "not capturing";
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_TRUE(RecordIfCapturing(stream_, [&] {
    ran.push_back(1);
    return cudaSuccess;
  }));
  ASSERT_TRUE(RecordIfCapturing(stream_, [&] {
    ran.push_back(2);
    return cudaErrorLaunchFailure;
  }));
  ASSERT_TRUE(RecordIfCapturing(stream_, [&] {
    ran.push_back(3);
    return cudaSuccess;
  }));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_TRUE(ran.empty()) << "a capture runs nothing";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaErrorLaunchFailure);
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

}  // namespace
}  // namespace tandem::cuda_emu::testing
