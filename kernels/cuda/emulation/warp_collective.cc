#include "kernels/cuda/emulation/warp_collective.h"

namespace tandem::cuda_emu {

const char* WarpOpName(WarpOp op) {
  switch (op) {
    case WarpOp::kSyncWarp:
      return "__syncwarp";
    case WarpOp::kShflIdx:
      return "__shfl_sync";
    case WarpOp::kShflUp:
      return "__shfl_up_sync";
    case WarpOp::kShflDown:
      return "__shfl_down_sync";
    case WarpOp::kShflXor:
      return "__shfl_xor_sync";
    case WarpOp::kBallot:
      return "__ballot_sync";
    case WarpOp::kAny:
      return "__any_sync";
    case WarpOp::kAll:
      return "__all_sync";
    case WarpOp::kActiveMask:
      return "__activemask";
  }
  return "?";
}

int ShuffleSourceLane(const WarpArrival& arrival, int lane) {
  // PTX: segmask = 32 - width (the lane bits naming the segment), b = operand[4:0].
  const int segment_mask = (kWarpSize - arrival.width) & 31;
  const int b = arrival.operand & 31;
  const int min_lane = lane & segment_mask;
  const int max_lane = min_lane | (31 & ~segment_mask);
  int source = lane;
  bool in_range = true;
  switch (arrival.op) {
    case WarpOp::kShflIdx:
      source = min_lane | (b & ~segment_mask);
      break;
    case WarpOp::kShflUp:
      source = lane - b;
      in_range = source >= min_lane;
      break;
    case WarpOp::kShflDown:
      source = lane + b;
      in_range = source <= max_lane;
      break;
    case WarpOp::kShflXor:
      source = lane ^ b;
      in_range = source <= max_lane;
      break;
    default:
      break;
  }
  return in_range ? source : lane;
}

void ComputeWarpResults(const std::array<WarpArrival, kWarpSize>& arrivals, unsigned participants,
                        std::array<uint64_t, kWarpSize>& results) {
  unsigned votes = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((participants >> lane & 1u) && arrivals[lane].value != 0) votes |= 1u << lane;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(participants >> lane & 1u)) continue;
    const WarpArrival& arrival = arrivals[lane];
    switch (arrival.op) {
      case WarpOp::kSyncWarp:
        results[lane] = 0;
        break;
      case WarpOp::kBallot:
        results[lane] = votes;
        break;
      case WarpOp::kAny:
        results[lane] = votes != 0;
        break;
      case WarpOp::kAll:
        results[lane] = votes == participants;
        break;
      default: {
        const int source = ShuffleSourceLane(arrival, lane);
        results[lane] =
            (participants >> source & 1u) ? arrivals[source].value : kUndefinedShuffleBits;
      }
    }
  }
}

}  // namespace tandem::cuda_emu
