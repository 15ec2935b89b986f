// Which emulated CUDA thread the calling OS thread is running now: what
// threadIdx, blockIdx, blockDim, gridDim and the intrinsics read. The block
// runner rewrites it before every switch to a thread. Internal to
// kernels/cuda/emulation.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_THREAD_CONTEXT_H_
#define TANDEM_KERNELS_CUDA_EMULATION_THREAD_CONTEXT_H_

#include "kernels/cuda/emulation/cuda_types.h"

namespace tandem::cuda_emu {

class BlockRunner;

struct ThreadContext {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{0, 0, 0};
  dim3 grid_dim{0, 0, 0};
  BlockRunner* runner = nullptr;  // null outside a kernel
  unsigned char* dynamic_shared = nullptr;
};

// One per OS thread: all fibers of a block run on the OS thread that runs
// the block.
inline thread_local ThreadContext current_thread_context;

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_THREAD_CONTEXT_H_
