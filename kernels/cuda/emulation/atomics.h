// CUDA's atomic read-modify-write functions under emulation, on device
// (cudaMalloc) or shared memory. Each returns the old value. They are relaxed
// atomics, as on the GPU: no ordering of other memory accesses, and under
// ThreadSanitizer no happens-before (only barriers create it). They are
// real std::atomic_ref operations so that launches running on different host
// threads at once stay correct.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_

#include <atomic>

namespace tandem::cuda_emu {

template <typename T>
inline std::atomic_ref<T> AtomicAt(T* address) {
  return std::atomic_ref<T>(*address);
}

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
inline T AtomicMax(T* address, T value) {
  return AtomicUpdate(address, value, [](T a, T b) { return a < b ? b : a; });
}

template <typename T>
inline T AtomicMin(T* address, T value) {
  return AtomicUpdate(address, value, [](T a, T b) { return b < a ? b : a; });
}

template <typename T>
inline T AtomicCas(T* address, T compare, T value) {
  AtomicAt(address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // holds the old value whether or not the exchange happened
}

}  // namespace tandem::cuda_emu

#define TANDEM_CUDA_EMU_ATOMIC_RMW(name, type, expr)                                     \
  inline type name(type* address, type value) {                                          \
    return expr;                                                                         \
  }

TANDEM_CUDA_EMU_ATOMIC_RMW(atomicAdd, int, tandem::cuda_emu::AtomicAt(address).fetch_add(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicAdd, unsigned int, tandem::cuda_emu::AtomicAt(address).fetch_add(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicAdd, unsigned long long, tandem::cuda_emu::AtomicAt(address).fetch_add(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicAdd, float, tandem::cuda_emu::AtomicUpdate(address, value, [](float a, float b) { return a + b; }))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicAdd, double, tandem::cuda_emu::AtomicUpdate(address, value, [](double a, double b) { return a + b; }))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicSub, int, tandem::cuda_emu::AtomicAt(address).fetch_sub(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicSub, unsigned int, tandem::cuda_emu::AtomicAt(address).fetch_sub(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMax, int, tandem::cuda_emu::AtomicMax(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMax, unsigned int, tandem::cuda_emu::AtomicMax(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMax, unsigned long long, tandem::cuda_emu::AtomicMax(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMin, int, tandem::cuda_emu::AtomicMin(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMin, unsigned int, tandem::cuda_emu::AtomicMin(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicMin, unsigned long long, tandem::cuda_emu::AtomicMin(address, value))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicExch, int, tandem::cuda_emu::AtomicAt(address).exchange(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicExch, unsigned int, tandem::cuda_emu::AtomicAt(address).exchange(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicExch, unsigned long long, tandem::cuda_emu::AtomicAt(address).exchange(value, std::memory_order_relaxed))
TANDEM_CUDA_EMU_ATOMIC_RMW(atomicExch, float, tandem::cuda_emu::AtomicAt(address).exchange(value, std::memory_order_relaxed))

#undef TANDEM_CUDA_EMU_ATOMIC_RMW

inline int atomicCAS(int* address, int compare, int value) {
  return tandem::cuda_emu::AtomicCas(address, compare, value);
}
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int value) {
  return tandem::cuda_emu::AtomicCas(address, compare, value);
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long value) {
  return tandem::cuda_emu::AtomicCas(address, compare, value);
}

#endif  // TANDEM_KERNELS_CUDA_EMULATION_ATOMICS_H_
