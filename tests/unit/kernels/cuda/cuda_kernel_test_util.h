// Helpers shared by the tests of kernels/cuda kernels under emulation.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_CUDA_KERNEL_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cuda/emulation/execution_order.h"
#include "kernels/ggml_type.h"

namespace tandem::cuda::testing {

// Sequential and one seeded random order: for tests at model-sized shapes,
// where one launch runs tens of thousands of emulated threads and costs
// seconds. Their small-shape twins run in every order of
// cuda_emu::testing::TestOrders().
inline std::vector<cuda_emu::ExecutionOrder> FewOrders() {
  return {{cuda_emu::ExecutionOrder::Kind::kSequential, 0},
          {cuda_emu::ExecutionOrder::Kind::kRandom, 3}};
}

// Bytes per row of `cols` elements of `type` plus garbage padding, so that a
// read past a row's blocks shows: 6 bytes (rows only 2-byte aligned, the
// 16-bit types' and block scales' alignment), 8 for F32 (4-byte aligned).
inline int64_t PaddedRowBytes(gguf::GgmlType type, int64_t cols) {
  return cols / kernels::WeightBlockElems(type) * kernels::WeightBlockBytes(type) +
         (type == gguf::GgmlType::kF32 ? 8 : 6);
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
