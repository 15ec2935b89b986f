// Runs one thread block of an emulated kernel: each CUDA thread is a
// ThreadFiber, all on the calling OS thread, switched only at sync points
// (__syncthreads, warp collectives, thread exit), in the ExecutionOrder
// given.
//
// Barrier semantics (CUDA's, checked strictly):
// - __syncthreads releases when every live (not yet exited) thread of the
//   block waits at it; all must wait at the same call site.
// - A warp collective completes when every lane of its mask has arrived at
//   the same intrinsic with the same mask; results are computed then, from
//   that one round. Lanes past the end of a partial last warp do not exist
//   and are dropped from masks (shuffles reading them get undefined bits).
// - __activemask has no convergence to report here, so it stands in for it:
//   a lane calling it waits until no thread of the block can run, then
//   gets the lanes of its warp waiting at the same __activemask call.
//   Lanes still inside other branches (blocked elsewhere, or exited) are
//   not in it, as on a GPU after divergence.
// - A mask naming an exited lane (stricter than CUDA, which leaves reading
//   it undefined: it is almost always an early-return bug), threads waiting
//   at different barriers, and deadlock abort via Fatal() with the kernel,
//   block, thread and source line.
//
// Under TSan the barriers are the only happens-before edges between the
// block's threads (sanitizer_hooks.h); __syncwarp orders its lanes' memory
// accesses as on the GPU, the other warp collectives do not.
//
// Thread-safety: one BlockRunner per block, used on one OS thread.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_BLOCK_RUNNER_H_
#define TANDEM_KERNELS_CUDA_EMULATION_BLOCK_RUNNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/cuda_types.h"
#include "kernels/cuda/emulation/execution_order.h"
#include "kernels/cuda/emulation/thread_fiber.h"
#include "kernels/cuda/emulation/warp_collective.h"

namespace tandem::cuda_emu {

struct BlockSpec {
  const char* kernel_name = "";
  dim3 grid_dim;
  dim3 block_dim;
  uint3 block_idx{0, 0, 0};
  unsigned char* dynamic_shared = nullptr;  // the block's, already poisoned
  ExecutionOrder order;
};

class BlockRunner {
 public:
  // `kernel` is called once per thread, on that thread's fiber.
  BlockRunner(const BlockSpec& spec, const std::function<void()>& kernel);
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs every thread to its end; aborts on barrier misuse or deadlock.
  void Run();

  // Called by the thread running now (device_intrinsics.h).
  void SyncThreads(const std::source_location& site);
  // Returns this lane's result bits (ComputeWarpResults).
  uint64_t WarpCollective(const WarpArrival& arrival, const std::source_location& site);

 private:
  enum class State { kNotStarted, kReady, kRunning, kAtBarrier, kAtWarp, kExited };
  struct Thread {
    uint3 idx{0, 0, 0};
    State state = State::kNotStarted;
    std::source_location site;   // where it waits
    WarpArrival arrival;         // kAtWarp: its arrival
    uint64_t result = 0;         // the collective's result for it
    char* warp_token = nullptr;  // TSan address of its __syncwarp
    std::unique_ptr<ThreadFiber> fiber;
  };

  // Per warp, which lanes are where: kept with every state change so that a
  // warp collective's arrival checks and completion test are O(1) when
  // nothing is wrong (the lane-by-lane loops run only to name a problem or
  // when waiting lanes differ in their collective).
  struct WarpLanes {
    unsigned at_warp = 0;     // lanes in kAtWarp
    unsigned blocked = 0;     // lanes exited or at __syncthreads
    WarpArrival collective;   // of the lanes at_warp, when `uniform`
    bool uniform = true;      // every lane at_warp arrived at `collective`
  };

  int PickReady();
  void SetReady(int t, bool ready);
  // Records that `t` waits at `arrival` (WarpLanes).
  void EnterWarpCollective(int t, const WarpArrival& arrival);
  void RunThread(int t);
  void OnThreadExit(int t);
  void MaybeOpenBarrier();
  void CheckBarrierArrival(int t, const std::source_location& site) const;
  void CheckWarpArrival(int t, const WarpArrival& arrival, unsigned participants,
                        const std::source_location& site) const;
  void ValidateWarpArrival(int t, const WarpArrival& arrival,
                           const std::source_location& site) const;
  char* WarpToken(int t, const WarpArrival& arrival, unsigned participants);
  void MaybeCompleteWarp(int t, unsigned participants);
  bool CompleteActiveMasks();
  unsigned ExistingLanes(int warp) const;
  [[noreturn]] void FailDeadlock() const;
  std::string Where(int t) const;
  std::string ThreadName(int t) const;
  std::string WaitDescription(int t) const;

  BlockSpec spec_;
  const std::function<void()>& kernel_;
  int num_threads_ = 0;
  int live_ = 0;
  int current_ = -1;
  std::vector<Thread> threads_;
  std::vector<WarpLanes> warps_;  // [warps of the block]
  std::vector<uint64_t> ready_;  // bitset over threads
  int num_ready_ = 0;
  std::mt19937_64 rng_;
  int barrier_waiting_ = 0;
  std::source_location barrier_site_;
  unsigned barrier_generation_ = 0;
  // TSan addresses: the block's start publishes the launching thread's work
  // to the threads; barrier rounds alternate between two (a thread may
  // arrive at round n+1 before a slower one has left round n, but round
  // n+2 needs everyone out of round n); __syncwarps get one each; thread
  // exits publish to the launching thread.
  char start_token_ = 0;
  char barrier_tokens_[2] = {0, 0};
  std::deque<char> warp_tokens_;
  char exit_token_ = 0;
};

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_BLOCK_RUNNER_H_
