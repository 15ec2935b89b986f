// Budgets of the decode step's memory accesses, counted by the emulator on
// the profiled kernels (tandem_device_profiled: every load and store of the
// kernels seen, kernels/cuda/emulation/counters.h) for the tiny model with
// bf16 weights: the decode attention and the GEMVs read coalesced (target:
// at least 90% of each sector used) and in 16-byte loads (target: all of
// their weight loads). Budgets below the target are today's values; the
// GPU-speed issue raises them.
#include <cstdint>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "kernels/cuda/emulation/counters.h"
#include "tests/unit/engine/device/decode_step_counts.h"

namespace tandem::device {
namespace {

using cuda_emu::KernelCounters;
using cuda_emu::MemoryCounters;

constexpr int kWidth16 = 4;  // MemoryCounters::requests_by_width index

struct LoadBudget {
  const char* kernel_prefix;
  double min_coalescing;   // of global loads
  double min_16_byte_share;  // of global load requests
};

// Today's values where they miss the target (measured 2026-11-29, 1 and 8
// sequences): the decode attention uses 71% of its sectors and loads 2 or
// 4 bytes at a time (targets 0.9 and 1); the GEMV's weight loads are all
// 16 bytes, but its x loads waste sectors (60% at 1 sequence, 51.5% at 8;
// target 0.9).
constexpr LoadBudget kBudgets[] = {
    {"DecodePartitionKernel", 0.70, 0.0},
    {"Gemv16Kernel", 0.51, 1.0},
};

double SixteenByteShare(const MemoryCounters& c) {
  return c.requests == 0 ? 0.0
                         : static_cast<double>(c.requests_by_width[kWidth16]) /
                               static_cast<double>(c.requests);
}

// The global loads of every launch of kernels named `prefix`..., summed.
MemoryCounters LoadsOf(const cuda_emu::CounterSnapshot& c, const char* prefix) {
  MemoryCounters loads;
  for (const KernelCounters& k : c.kernels) {
    if (k.name.rfind(prefix, 0) == 0) loads.Add(k.global_loads);
  }
  return loads;
}

class StepAccessBudgetTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(StepAccessBudgetTest, DecodeAttentionAndGemvLoads) {
  const int32_t num_seqs = GetParam();
  const cuda_emu::CounterSnapshot c = testing::CountDecodeStep(num_seqs);
  ASSERT_TRUE(cuda_emu::AccessCountingLinked());
  for (const LoadBudget& budget : kBudgets) {
    SCOPED_TRACE(budget.kernel_prefix);
    const MemoryCounters loads = LoadsOf(c, budget.kernel_prefix);
    std::printf("decode, %d sequence(s), %s: global loads %lld requests, coalescing %.3f, "
                "16-byte share %.3f\n",
                num_seqs, budget.kernel_prefix, static_cast<long long>(loads.requests),
                loads.Coalescing(), SixteenByteShare(loads));
    ASSERT_GT(loads.requests, 0) << "no load was counted";
    EXPECT_GE(loads.Coalescing(), budget.min_coalescing);
    EXPECT_GE(SixteenByteShare(loads), budget.min_16_byte_share);
  }
}

INSTANTIATE_TEST_SUITE_P(Sequences, StepAccessBudgetTest, ::testing::Values(1, 8));

}  // namespace
}  // namespace tandem::device
