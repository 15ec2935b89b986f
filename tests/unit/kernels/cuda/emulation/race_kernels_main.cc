// Runs one kernel of broken_kernels.h once, for check_tsan_race.sh: in the
// TSan build the missing-barrier variants must produce a data-race report
// and the correct ones none.
//
//   cuda_emulation_race_kernels tree-broken|tree-correct|broadcast-broken|broadcast-correct
#include <cstdio>
#include <string>
#include <vector>

#include "tests/unit/kernels/cuda/emulation/broken_kernels.h"

int main(int argc, char** argv) {
  using tandem::cuda_emu::testing::RunBroadcast;
  using tandem::cuda_emu::testing::RunTreeReduction;
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode == "tree-broken" || mode == "tree-correct") {
    std::vector<float> in(128, 1.0f);
    std::printf("sum %.1f (expected 128.0)\n", RunTreeReduction(in, mode == "tree-correct"));
    return 0;
  }
  if (mode == "broadcast-broken" || mode == "broadcast-correct") {
    std::printf("thread 5 read %d (expected 42)\n",
                RunBroadcast(42, 64, mode == "broadcast-correct")[5]);
    return 0;
  }
  std::fprintf(stderr, "usage: %s tree-broken|tree-correct|broadcast-broken|broadcast-correct\n",
               argv[0]);
  return 2;
}
