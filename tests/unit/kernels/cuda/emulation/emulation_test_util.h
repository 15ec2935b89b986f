// Helpers for tests of kernels under CUDA emulation: device buffers and a
// fixture that runs each test under several execution orders.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_EMULATION_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_EMULATION_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/execution_order.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda_emu::testing {

// n elements of device memory, freed on destruction. Every byte starts as
// 0xFF, as the emulator's cudaMalloc leaves it, so that the tests' guards
// (floats after an output that a kernel must leave alone) read the same on a
// GPU, where fresh memory holds whatever was there.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&data_, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, 0xFF, n * sizeof(T)), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), n_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  std::size_t n_;
  T* data_ = nullptr;
};

// The orders every small-shape kernel test runs in. Under TSan two of them:
// a missing barrier is a race there whatever the order (TSan checks
// happens-before, not results), so the other orders, which catch a result
// that changes with the order, run in the ASan build, where a test costs a
// fraction of TSan's vector clocks at every barrier.
inline std::vector<ExecutionOrder> TestOrders() {
#if defined(__SANITIZE_THREAD__)
  return {{ExecutionOrder::Kind::kSequential, 0}, {ExecutionOrder::Kind::kRandom, 1}};
#else
  return {{ExecutionOrder::Kind::kSequential, 0},
          {ExecutionOrder::Kind::kReverse, 0},
          {ExecutionOrder::Kind::kRandom, 1},
          {ExecutionOrder::Kind::kRandom, 7}};
#endif
}

inline std::string OrderTestName(const ::testing::TestParamInfo<ExecutionOrder>& info) {
  std::string name = ExecutionOrderName(info.param);
  for (char& c : name) {
    if (c == ':') c = '_';
  }
  return name;
}

// Runs each test once per TestOrders() entry; checks that every launch left
// no error behind.
class OrderedTest : public ::testing::TestWithParam<ExecutionOrder> {
 protected:
  void SetUp() override {
    SetExecutionOrder(GetParam());
    cudaGetLastError();
  }
  void TearDown() override { EXPECT_EQ(cudaGetLastError(), cudaSuccess); }
};

}  // namespace tandem::cuda_emu::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_EMULATION_TEST_UTIL_H_
