// TANDEM_HOST_DEVICE marks a function both the host and CUDA kernels call:
// __host__ __device__ under nvcc, nothing for the host compiler (and the
// CUDA emulator, which compiles kernels as host code).
#ifndef TANDEM_KERNELS_HOST_DEVICE_H_
#define TANDEM_KERNELS_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

#endif  // TANDEM_KERNELS_HOST_DEVICE_H_
