// What one warp collective (__shfl*_sync, __ballot_sync, __any_sync,
// __all_sync, __syncwarp) computes once every lane it names has arrived. Pure
// functions of the lanes' arrivals; block_runner decides when a collective is
// complete. Internal to kernels/cuda/emulation.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_WARP_COLLECTIVE_H_
#define TANDEM_KERNELS_CUDA_EMULATION_WARP_COLLECTIVE_H_

#include <array>
#include <cstdint>

namespace tandem::cuda_emu {

inline constexpr int kWarpSize = 32;

// kActiveMask names no lanes: block_runner completes it itself (see there).
enum class WarpOp {
  kSyncWarp,
  kShflIdx,
  kShflUp,
  kShflDown,
  kShflXor,
  kBallot,
  kAny,
  kAll,
  kActiveMask
};

// The CUDA name of the intrinsic ("__shfl_down_sync").
const char* WarpOpName(WarpOp op);

// One lane's arrival at a collective.
struct WarpArrival {
  WarpOp op = WarpOp::kSyncWarp;
  unsigned mask = 0;      // as the lane passed it
  int width = kWarpSize;  // shuffles: a power of two in [1, 32]
  int operand = 0;        // srcLane, delta or laneMask
  uint64_t value = 0;     // the shuffled bits, or the vote predicate (0 / 1)
};

// Lanes take part in the same collective when they call the same intrinsic
// with the same mask (CUDA: "all non-exited threads named in mask must
// execute the same intrinsic with the same mask").
inline bool SameCollective(const WarpArrival& a, const WarpArrival& b) {
  return a.op == b.op && a.mask == b.mask;
}

// Bits a shuffle returns when it reads a lane that does not take part (CUDA:
// undefined): all ones, NaN as a float, -1 as an integer.
inline constexpr uint64_t kUndefinedShuffleBits = ~uint64_t{0};

// The lane a shuffle by `lane` reads, per the PTX shfl.sync definition (the
// operand's low 5 bits; a source outside the lane's width-segment, or past
// it for __shfl_up/down, means the lane's own value).
int ShuffleSourceLane(const WarpArrival& arrival, int lane);

// Fills results[lane] for every lane in `participants` (a set of lanes that
// all arrived at one collective; arrivals[lane] holds each one's arrival).
void ComputeWarpResults(const std::array<WarpArrival, kWarpSize>& arrivals, unsigned participants,
                        std::array<uint64_t, kWarpSize>& results);

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_WARP_COLLECTIVE_H_
