// Helpers shared by the tests of kernels/cuda kernels under emulation.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_

#include <vector>

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

}  // namespace tandem::cuda::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_
