// Atomics under emulation: every supported type and operation under
// contention from all threads of several blocks, on global and shared
// memory, and from kernels launched by two host threads at once (the only
// case where emulated threads truly run in parallel).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <thread>
#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

constexpr int kBlocks = 4;
constexpr int kThreads = 256;
constexpr int kTotal = kBlocks * kThreads;

struct Counters {
  int add_int;
  unsigned add_unsigned;
  unsigned long long add_ull;
  float add_float;
  double add_double;
  int max_int;
  int min_int;
  unsigned max_unsigned;
  unsigned min_unsigned;
  unsigned long long max_ull;
  unsigned long long min_ull;
  int cas_counter;
};

__global__ void ContendedAtomicsKernel(Counters* c) {
  const int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&c->add_int, id - 100);
  atomicAdd(&c->add_unsigned, 3u);
  atomicAdd(&c->add_ull, 1ull << 33);
  atomicAdd(&c->add_float, 0.5f);
  atomicAdd(&c->add_double, 0.25);
  atomicMax(&c->max_int, id * 7 % 1000 - 500);
  atomicMin(&c->min_int, id * 7 % 1000 - 500);
  atomicMax(&c->max_unsigned, static_cast<unsigned>(id) * 2654435761u);
  atomicMin(&c->min_unsigned, static_cast<unsigned>(id) * 2654435761u + 1u);
  atomicMax(&c->max_ull, static_cast<unsigned long long>(id) << 40);
  atomicMin(&c->min_ull, (static_cast<unsigned long long>(id) << 40) + 5);
  int seen = atomicAdd(&c->cas_counter, 0);  // an atomic read: other host threads CAS it
  for (int assumed = seen - 1; assumed != seen;) {
    assumed = seen;
    seen = atomicCAS(&c->cas_counter, assumed, assumed + 1);
  }
}

Counters InitialCounters() {
  Counters c{};
  c.max_int = std::numeric_limits<int>::min();
  c.min_int = std::numeric_limits<int>::max();
  c.max_unsigned = 0;
  c.min_unsigned = std::numeric_limits<unsigned>::max();
  c.max_ull = 0;
  c.min_ull = std::numeric_limits<unsigned long long>::max();
  return c;
}

void ExpectCounters(const Counters& c, int launches) {
  long long add_int = 0;
  int max_int = std::numeric_limits<int>::min();
  int min_int = std::numeric_limits<int>::max();
  unsigned max_unsigned = 0;
  unsigned min_unsigned = std::numeric_limits<unsigned>::max();
  for (int id = 0; id < kTotal; ++id) {
    add_int += id - 100;
    max_int = std::max(max_int, id * 7 % 1000 - 500);
    min_int = std::min(min_int, id * 7 % 1000 - 500);
    max_unsigned = std::max(max_unsigned, static_cast<unsigned>(id) * 2654435761u);
    min_unsigned = std::min(min_unsigned, static_cast<unsigned>(id) * 2654435761u + 1u);
  }
  EXPECT_EQ(c.add_int, add_int * launches);
  EXPECT_EQ(c.add_unsigned, 3u * kTotal * launches);
  EXPECT_EQ(c.add_ull, (1ull << 33) * kTotal * launches);
  EXPECT_EQ(c.add_float, 0.5f * kTotal * launches);  // exact: small multiples of 0.5
  EXPECT_EQ(c.add_double, 0.25 * kTotal * launches);
  EXPECT_EQ(c.max_int, max_int);
  EXPECT_EQ(c.min_int, min_int);
  EXPECT_EQ(c.max_unsigned, max_unsigned);
  EXPECT_EQ(c.min_unsigned, min_unsigned);
  EXPECT_EQ(c.max_ull, static_cast<unsigned long long>(kTotal - 1) << 40);
  EXPECT_EQ(c.min_ull, 5ull);
  EXPECT_EQ(c.cas_counter, kTotal * launches);
}

class AtomicsTest : public OrderedTest {};

TEST_P(AtomicsTest, EveryOperationUnderContentionAcrossBlocks) {
  DeviceBuffer<Counters> counters(std::vector<Counters>{InitialCounters()});
  TANDEM_LAUNCH(ContendedAtomicsKernel, kBlocks, kThreads, 0, nullptr, counters.get());
  ExpectCounters(counters.Download()[0], 1);
}

TEST_P(AtomicsTest, LaunchesFromTwoHostThreadsAtOnce) {
  DeviceBuffer<Counters> counters(std::vector<Counters>{InitialCounters()});
  auto launch = [&] {
    for (int i = 0; i < 4; ++i) {
      TANDEM_LAUNCH(ContendedAtomicsKernel, kBlocks, kThreads, 0, nullptr, counters.get());
    }
  };
  std::thread other(launch);
  launch();
  other.join();
  ExpectCounters(counters.Download()[0], 8);
}

// Each thread swaps its id into one slot: the old values handed out, plus
// what is left in the slot, are the initial value and every id, once each.
__global__ void ExchangeKernel(int* slot, int* olds, float* float_slot, float* float_olds,
                               unsigned long long* ull_slot, unsigned long long* ull_olds) {
  const int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  olds[id] = atomicExch(slot, id);
  float_olds[id] = atomicExch(float_slot, static_cast<float>(id));
  ull_olds[id] = atomicExch(ull_slot, static_cast<unsigned long long>(id) << 32);
}

TEST_P(AtomicsTest, ExchangeHandsOutEveryValueOnce) {
  DeviceBuffer<int> slot(std::vector<int>{-1});
  DeviceBuffer<int> olds(kTotal);
  DeviceBuffer<float> float_slot(std::vector<float>{-1.0f});
  DeviceBuffer<float> float_olds(kTotal);
  DeviceBuffer<unsigned long long> ull_slot(std::vector<unsigned long long>{~0ull});
  DeviceBuffer<unsigned long long> ull_olds(kTotal);
  TANDEM_LAUNCH(ExchangeKernel, kBlocks, kThreads, 0, nullptr, slot.get(), olds.get(),
                float_slot.get(), float_olds.get(), ull_slot.get(), ull_olds.get());
  std::vector<int> all = olds.Download();
  all.push_back(slot.Download()[0]);
  std::sort(all.begin(), all.end());
  for (int i = 0; i <= kTotal; ++i) ASSERT_EQ(all[i], i - 1);
  std::vector<float> all_float = float_olds.Download();
  all_float.push_back(float_slot.Download()[0]);
  std::sort(all_float.begin(), all_float.end());
  for (int i = 0; i <= kTotal; ++i) ASSERT_EQ(all_float[i], static_cast<float>(i - 1));
  std::vector<unsigned long long> all_ull = ull_olds.Download();
  all_ull.push_back(ull_slot.Download()[0]);
  std::sort(all_ull.begin(), all_ull.end());
  for (int i = 0; i < kTotal; ++i) ASSERT_EQ(all_ull[i], static_cast<unsigned long long>(i) << 32);
  EXPECT_EQ(all_ull[kTotal], ~0ull);
}

__global__ void CasSemanticsKernel(unsigned* word, unsigned* results) {
  results[0] = atomicCAS(word, 5u, 9u);  // mismatch: returns 7, no change
  results[1] = *word;
  results[2] = atomicCAS(word, 7u, 9u);  // match: returns 7, stores 9
  results[3] = *word;
}

TEST_P(AtomicsTest, CompareAndSwapReturnsTheOldValue) {
  DeviceBuffer<unsigned> word(std::vector<unsigned>{7u});
  DeviceBuffer<unsigned> results(4);
  TANDEM_LAUNCH(CasSemanticsKernel, 1, 1, 0, nullptr, word.get(), results.get());
  EXPECT_EQ(results.Download(), (std::vector<unsigned>{7u, 7u, 7u, 9u}));
}

__global__ void SharedHistogramKernel(const int* keys, int* histogram) {
  __shared__ unsigned bins[8];
  const unsigned t = threadIdx.x;
  if (t < 8) bins[t] = 0;
  __syncthreads();
  atomicAdd(&bins[keys[blockIdx.x * blockDim.x + t] % 8], 1u);
  __syncthreads();
  if (t < 8) atomicAdd(&histogram[t], static_cast<int>(bins[t]));
}

TEST_P(AtomicsTest, SharedMemoryAtomicsThenGlobal) {
  std::vector<int> keys(kTotal);
  for (int i = 0; i < kTotal; ++i) keys[i] = i * 13 % 29;
  std::vector<int> expected(8, 0);
  for (int key : keys) ++expected[key % 8];
  DeviceBuffer<int> device_keys(keys);
  DeviceBuffer<int> histogram(std::vector<int>(8, 0));
  TANDEM_LAUNCH(SharedHistogramKernel, kBlocks, kThreads, 0, nullptr, device_keys.get(),
                histogram.get());
  EXPECT_EQ(histogram.Download(), expected);
}

INSTANTIATE_TEST_SUITE_P(Orders, AtomicsTest, ::testing::ValuesIn(TestOrders()), OrderTestName);

}  // namespace
}  // namespace tandem::cuda_emu::testing
