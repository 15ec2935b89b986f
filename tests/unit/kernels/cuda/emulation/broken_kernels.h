// Kernels with deliberate missing-barrier bugs that the emulation must
// expose: by a result that changes with the execution order
// (broken_kernels_test) and by a ThreadSanitizer data-race report naming
// both source lines (race_kernels_main + check_tsan_race.sh, in the TSan
// build). Lines carrying a "race-line:" marker are the ones a report must
// name.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_BROKEN_KERNELS_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_BROKEN_KERNELS_H_

#include <vector>

namespace tandem::cuda_emu::testing {

// Sums `in` (a power-of-two size <= 256) in one block with a shared-memory
// tree. The broken variant has no barrier between the tree's levels.
float RunTreeReduction(const std::vector<float>& in, bool with_barriers);

// Thread 0 reads *value into a __shared__ variable and every thread copies
// it out. The broken variant has no barrier between the write and the reads.
std::vector<int> RunBroadcast(int value, int threads, bool with_barrier);

}  // namespace tandem::cuda_emu::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_BROKEN_KERNELS_H_
