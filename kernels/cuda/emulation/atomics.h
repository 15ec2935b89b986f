// CUDA's atomic read-modify-write functions under emulation, on device
// (cudaMalloc) or shared memory. Each returns the old value. They are relaxed
// atomics, as on the GPU: no ordering of other memory accesses, and under
// ThreadSanitizer no happens-before (only barriers create it). They are
// real std::atomic_ref operations so that launches running on different host
// threads at once stay correct.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_

#include <atomic>
#include <type_traits>

namespace tandem::cuda_emu {

// Applies value = op(old, operand) with a CAS loop; returns old.
template <typename T, typename Op>
inline T AtomicUpdate(T* address, T operand, Op op) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, op(old, operand), std::memory_order_relaxed)) {
  }
  return old;
}

template <typename T>
inline T AtomicAdd(T* address, T value) {
  if constexpr (std::is_integral_v<T>) {
    return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
  } else {
    return AtomicUpdate(address, value, [](T a, T b) { return a + b; });
  }
}

template <typename T>
inline T AtomicSub(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_sub(value, std::memory_order_relaxed);
}

template <typename T>
inline T AtomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value, std::memory_order_relaxed);
}

template <typename T>
inline T AtomicMax(T* address, T value) {
  return AtomicUpdate(address, value, [](T a, T b) { return a < b ? b : a; });
}

template <typename T>
inline T AtomicMin(T* address, T value) {
  return AtomicUpdate(address, value, [](T a, T b) { return b < a ? b : a; });
}

template <typename T>
inline T AtomicCas(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // holds the old value whether or not the exchange happened
}

}  // namespace tandem::cuda_emu

// The overloads CUDA has (no templates, so argument conversions match it).

inline int atomicAdd(int* p, int v) { return tandem::cuda_emu::AtomicAdd(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return tandem::cuda_emu::AtomicAdd(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return tandem::cuda_emu::AtomicAdd(p, v);
}
inline float atomicAdd(float* p, float v) { return tandem::cuda_emu::AtomicAdd(p, v); }
inline double atomicAdd(double* p, double v) { return tandem::cuda_emu::AtomicAdd(p, v); }
inline int atomicSub(int* p, int v) { return tandem::cuda_emu::AtomicSub(p, v); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return tandem::cuda_emu::AtomicSub(p, v); }
inline int atomicMax(int* p, int v) { return tandem::cuda_emu::AtomicMax(p, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return tandem::cuda_emu::AtomicMax(p, v); }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return tandem::cuda_emu::AtomicMax(p, v);
}
inline int atomicMin(int* p, int v) { return tandem::cuda_emu::AtomicMin(p, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return tandem::cuda_emu::AtomicMin(p, v); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  return tandem::cuda_emu::AtomicMin(p, v);
}
inline int atomicExch(int* p, int v) { return tandem::cuda_emu::AtomicExch(p, v); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return tandem::cuda_emu::AtomicExch(p, v); }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  return tandem::cuda_emu::AtomicExch(p, v);
}
inline float atomicExch(float* p, float v) { return tandem::cuda_emu::AtomicExch(p, v); }
inline int atomicCAS(int* p, int compare, int v) {
  return tandem::cuda_emu::AtomicCas(p, compare, v);
}
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned v) {
  return tandem::cuda_emu::AtomicCas(p, compare, v);
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long compare,
                                    unsigned long long v) {
  return tandem::cuda_emu::AtomicCas(p, compare, v);
}

#endif  // TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_
