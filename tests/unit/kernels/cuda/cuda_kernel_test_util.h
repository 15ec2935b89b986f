// Helpers shared by the tests of kernels/cuda kernels under emulation.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_

#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cuda/emulation/execution_order.h"

namespace tandem::cuda::testing {

// Sequential and one seeded random order: for tests at model-sized shapes,
// where one launch runs tens of thousands of emulated threads and costs
// seconds. Their small-shape twins run in every order of
// cuda_emu::testing::TestOrders().
inline std::vector<cuda_emu::ExecutionOrder> FewOrders() {
  return {{cuda_emu::ExecutionOrder::Kind::kSequential, 0},
          {cuda_emu::ExecutionOrder::Kind::kRandom, 3}};
}

// Records the largest error a test measured as property `name` of the test
// (in the XML report) and prints it, so that a run shows how much of its
// tolerance a kernel uses.
inline void RecordMaxError(const char* name, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  ::testing::Test::RecordProperty(name, text);
  std::printf("%s: %s\n", name, text);
}

}  // namespace tandem::cuda::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_
