// The CUDA built-in variables and synchronizing intrinsics under emulation:
// threadIdx / blockIdx / blockDim / gridDim of the running emulated thread,
// __syncthreads, __syncwarp, the __shfl*_sync family, __ballot_sync,
// __any_sync, __all_sync, __activemask. Semantics are block_runner.h's.
// Each synchronizing call records its call site (a defaulted
// std::source_location argument) for the emulator's messages.
//
// Shuffles follow the PTX shfl.sync definition: the source is computed
// within the caller's width-segment; __shfl_up/down/xor whose source falls
// outside it return the caller's own value; reading a lane outside the mask
// gives undefined bits (all ones). Any trivially copyable type of up to 8
// bytes can be shuffled.
//
// __activemask returns the lanes of the caller's warp that reach the same
// __activemask call while the rest of the block is blocked or done: the
// emulator's stand-in for the lanes converged there (block_runner.h).
#ifndef TANDEM_KERNELS_CUDA_EMULATION_DEVICE_INTRINSICS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_DEVICE_INTRINSICS_H_

#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "kernels/cuda/emulation/cuda_types.h"
#include "kernels/cuda/emulation/thread_context.h"
#include "kernels/cuda/emulation/warp_collective.h"

namespace tandem::cuda_emu {

// Abort with the intrinsic's name when called outside a kernel.
void SyncThreads(const std::source_location& site);
uint64_t WarpCollective(const WarpArrival& arrival, const std::source_location& site);
unsigned ActiveMask(const std::source_location& site);
// The running block's dynamic shared memory (TANDEM_DYNAMIC_SHARED).
unsigned char* DynamicSharedMemory();

template <typename T>
T Shuffle(WarpOp op, unsigned mask, T var, int operand, int width,
          const std::source_location& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "shuffles move trivially copyable values of up to 8 bytes");
  WarpArrival arrival{op, mask, width, operand, 0};
  std::memcpy(&arrival.value, &var, sizeof(T));
  const uint64_t bits = WarpCollective(arrival, site);
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

}  // namespace tandem::cuda_emu

#define threadIdx (static_cast<const uint3&>(::tandem::cuda_emu::current_thread_context.thread_idx))
#define blockIdx (static_cast<const uint3&>(::tandem::cuda_emu::current_thread_context.block_idx))
#define blockDim (static_cast<const dim3&>(::tandem::cuda_emu::current_thread_context.block_dim))
#define gridDim (static_cast<const dim3&>(::tandem::cuda_emu::current_thread_context.grid_dim))

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  tandem::cuda_emu::SyncThreads(site);
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  tandem::cuda_emu::WarpCollective({tandem::cuda_emu::WarpOp::kSyncWarp, mask, warpSize, 0, 0},
                                   site);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location site = std::source_location::current()) {
  return tandem::cuda_emu::Shuffle(tandem::cuda_emu::WarpOp::kShflIdx, mask, var, src_lane, width,
                                   site);
}

template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location site = std::source_location::current()) {
  return tandem::cuda_emu::Shuffle(tandem::cuda_emu::WarpOp::kShflUp, mask, var,
                                   static_cast<int>(delta), width, site);
}

template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location site = std::source_location::current()) {
  return tandem::cuda_emu::Shuffle(tandem::cuda_emu::WarpOp::kShflDown, mask, var,
                                   static_cast<int>(delta), width, site);
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location site = std::source_location::current()) {
  return tandem::cuda_emu::Shuffle(tandem::cuda_emu::WarpOp::kShflXor, mask, var, lane_mask, width,
                                   site);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(tandem::cuda_emu::WarpCollective(
      {tandem::cuda_emu::WarpOp::kBallot, mask, warpSize, 0, predicate != 0}, site));
}

inline int __any_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(tandem::cuda_emu::WarpCollective(
      {tandem::cuda_emu::WarpOp::kAny, mask, warpSize, 0, predicate != 0}, site));
}

inline int __all_sync(unsigned mask, int predicate,
                      std::source_location site = std::source_location::current()) {
  return static_cast<int>(tandem::cuda_emu::WarpCollective(
      {tandem::cuda_emu::WarpOp::kAll, mask, warpSize, 0, predicate != 0}, site));
}

inline unsigned __activemask(std::source_location site = std::source_location::current()) {
  return tandem::cuda_emu::ActiveMask(site);
}

#endif  // TANDEM_KERNELS_CUDA_EMULATION_DEVICE_INTRINSICS_H_
