// CUDA's fast-math and bit-reinterpretation intrinsics under emulation. The
// fast variants (__expf, __logf, __fdividef, ...) are computed at full float
// precision here: a kernel checked under emulation must hold its tolerance
// against the GPU's approximate versions too (their error bounds are in the
// CUDA programming guide, "Intrinsic Functions"). rsqrtf, fmaxf, fminf,
// expf, ... come from <cmath> as on the device.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_MATH_INTRINSICS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_MATH_INTRINSICS_H_

#include <math.h>  // expf, fmaxf, ... in the global namespace, as CUDA has them

#include <atomic>
#include <bit>
#include <cmath>

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp2f(float x) { return std::exp2(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __saturatef(float x) { return x > 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }

inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }

// Loads through the read-only cache on the GPU; a plain load here.
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// Memory fences order a thread's own accesses; they never make threads wait,
// so they are not scheduling points and create no happens-before under TSan.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

#endif  // TANDEM_KERNELS_CUDA_EMULATION_MATH_INTRINSICS_H_
