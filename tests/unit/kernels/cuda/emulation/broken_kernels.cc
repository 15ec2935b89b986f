#include "tests/unit/kernels/cuda/emulation/broken_kernels.h"

#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

__global__ void TreeReductionKernel(const float* in, float* out, bool with_barriers) {
  __shared__ float partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = in[t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];  // race-line: tree-level
    if (with_barriers) __syncthreads();                 // the broken variant skips it
  }
  if (t == 0) out[0] = partial[0];
}

__global__ void BroadcastKernel(const int* value, int* out, bool with_barrier) {
  __shared__ int shared_value;
  if (threadIdx.x == 0) shared_value = *value;  // race-line: broadcast-write
  if (with_barrier) __syncthreads();            // the broken variant skips it
  out[threadIdx.x] = shared_value;              // race-line: broadcast-read
}

}  // namespace

float RunTreeReduction(const std::vector<float>& in, bool with_barriers) {
  DeviceBuffer<float> device_in(in);
  DeviceBuffer<float> out(1);
  TANDEM_LAUNCH(TreeReductionKernel, 1, static_cast<unsigned>(in.size()), 0, nullptr,
                device_in.get(), out.get(), with_barriers);
  return out.Download()[0];
}

std::vector<int> RunBroadcast(int value, int threads, bool with_barrier) {
  DeviceBuffer<int> device_value(std::vector<int>{value});
  DeviceBuffer<int> out(threads);
  TANDEM_LAUNCH(BroadcastKernel, 1, static_cast<unsigned>(threads), 0, nullptr, device_value.get(),
                out.get(), with_barrier);
  return out.Download();
}

}  // namespace tandem::cuda_emu::testing
