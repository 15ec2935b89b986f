// Kernel launches under emulation: what TANDEM_LAUNCH expands to. A launch
// is checked like the CUDA runtime checks it (a bad shape, too much dynamic
// shared memory or a bad stream becomes the thread's last error and nothing
// runs), then runs to completion before returning, block after block on the
// calling thread (in the ExecutionOrder), each block's threads as fibers
// (block_runner.h). Arguments are copied once into the launch, as CUDA
// copies them into the parameter buffer, and each thread receives its own
// copy. A launch on a capturing stream is recorded into its graph instead
// (graph.h) and runs when the graph is launched.
//
// Limits are those of sm_80/sm_90: 1024 threads per block (z <= 64),
// grid.x < 2^31, grid.y/z <= 65535, 48 KiB of dynamic shared memory unless
// cudaFuncSetAttribute raises it (up to 227 KiB).
//
// Thread-safety: launches from different host threads may run at once.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_H_
#define TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_H_

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/cuda_types.h"
#include "kernels/cuda/emulation/graph.h"

namespace tandem::cuda_emu {

struct LaunchConfig {
  const char* kernel_name = "";
  const void* kernel = nullptr;  // identifies the kernel for its attributes
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;
  double flops = 0;  // declared by TANDEM_LAUNCH_FLOPS (counters.h)
};

// Checks `config` and runs `kernel_body` once per CUDA thread of the grid.
void LaunchKernel(const LaunchConfig& config, const std::function<void()>& kernel_body);

// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize).
cudaError_t SetMaxDynamicSharedBytes(const void* kernel, int bytes);

template <typename... Params, typename... Args>
void Launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t dynamic_shared_bytes, cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "TANDEM_LAUNCH: the argument count differs from the kernel's parameter count");
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  const LaunchConfig config{counters_internal::TakeDeclaredName(name),
                            reinterpret_cast<const void*>(kernel),
                            grid,   block,
                            dynamic_shared_bytes, stream,
                            counters_internal::TakeDeclaredFlops()};
  // Captured: the parameters are copied into the graph, as CUDA does.
  if (IsCapturing(stream) && RecordIfCapturing(stream, [config, kernel, params] {
        LaunchKernel(config, [&] { std::apply(kernel, params); });
        return cudaSuccess;
      })) {
    return;
  }
  LaunchKernel(config, [&] { std::apply(kernel, params); });
}

}  // namespace tandem::cuda_emu

template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute,
                                 int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return tandem::cuda_emu::SetMaxDynamicSharedBytes(reinterpret_cast<const void*>(kernel), value);
}

#endif  // TANDEM_KERNELS_CUDA_EMULATION_LAUNCH_H_
