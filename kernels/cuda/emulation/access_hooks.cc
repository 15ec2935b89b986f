// The memory-access hooks of the profiled kernel builds (counters.h). Those
// are compiled with GCC's -fsanitize=thread instrumentation, which calls
// __tsan_readN / __tsan_writeN / __tsan_atomicN_* before every access, but
// linked without the TSan runtime: these definitions take its place and
// pass each access to LaunchCounting (which ignores it unless a sampled
// block is running). Atomics are performed here, sequentially consistent
// (at least as strong as what the instrumented code asked for).
//
// Only in builds without a sanitizer (kernels/cuda/CMakeLists.txt): a TSan
// build links the real runtime, an ASan build cannot mix the two.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/launch_counting.h"

namespace {

using tandem::cuda_emu::AccessKind;
using tandem::cuda_emu::LaunchCounting;

inline void Record(const volatile void* address, std::size_t bytes, AccessKind kind,
                   const void* pc) {
  LaunchCounting::RecordAccess(const_cast<const void*>(address), static_cast<unsigned>(bytes),
                               kind, pc);
}

}  // namespace

#define TANDEM_PC __builtin_return_address(0)

extern "C" {

// Called by every instrumented object's constructor.
void __tsan_init() { tandem::cuda_emu::counters_internal::MarkAccessCountingLinked(); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define TANDEM_ACCESS_HOOKS(N)                                                          \
  void __tsan_read##N(void* a) { Record(a, N, AccessKind::kLoad, TANDEM_PC); }             \
  void __tsan_write##N(void* a) { Record(a, N, AccessKind::kStore, TANDEM_PC); }           \
  void __tsan_unaligned_read##N(void* a) { Record(a, N, AccessKind::kLoad, TANDEM_PC); }   \
  void __tsan_unaligned_write##N(void* a) { Record(a, N, AccessKind::kStore, TANDEM_PC); } \
  void __tsan_volatile_read##N(void* a) { Record(a, N, AccessKind::kLoad, TANDEM_PC); }    \
  void __tsan_volatile_write##N(void* a) { Record(a, N, AccessKind::kStore, TANDEM_PC); }
TANDEM_ACCESS_HOOKS(1)
TANDEM_ACCESS_HOOKS(2)
TANDEM_ACCESS_HOOKS(4)
TANDEM_ACCESS_HOOKS(8)
TANDEM_ACCESS_HOOKS(16)
#undef TANDEM_ACCESS_HOOKS

void __tsan_read_range(void* a, std::size_t n) { Record(a, n, AccessKind::kLoad, TANDEM_PC); }
void __tsan_write_range(void* a, std::size_t n) { Record(a, n, AccessKind::kStore, TANDEM_PC); }

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define TANDEM_ATOMIC_RMW(N, T, op)                                      \
  T __tsan_atomic##N##_##op(volatile T* a, T v, int) {                   \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                \
    return __atomic_##op(a, v, __ATOMIC_SEQ_CST);                        \
  }
#define TANDEM_ATOMIC_HOOKS(N, T)                                                          \
  T __tsan_atomic##N##_load(const volatile T* a, int) {                                    \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                           \
  }                                                                                        \
  void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                 \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                              \
  }                                                                                        \
  T __tsan_atomic##N##_exchange(volatile T* a, T v, int) {                                 \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                    \
  }                                                                                        \
  TANDEM_ATOMIC_RMW(N, T, fetch_add)                                                       \
  TANDEM_ATOMIC_RMW(N, T, fetch_sub)                                                       \
  TANDEM_ATOMIC_RMW(N, T, fetch_and)                                                       \
  TANDEM_ATOMIC_RMW(N, T, fetch_or)                                                        \
  TANDEM_ATOMIC_RMW(N, T, fetch_xor)                                                       \
  TANDEM_ATOMIC_RMW(N, T, fetch_nand)                                                      \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {     \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
  }                                                                                        \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {       \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);  \
  }                                                                                        \
  T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {           \
    Record(a, sizeof(T), AccessKind::kAtomic, TANDEM_PC);                                  \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);       \
    return c;                                                                              \
  }
TANDEM_ATOMIC_HOOKS(8, uint8_t)
TANDEM_ATOMIC_HOOKS(16, uint16_t)
TANDEM_ATOMIC_HOOKS(32, uint32_t)
TANDEM_ATOMIC_HOOKS(64, uint64_t)
#undef TANDEM_ATOMIC_HOOKS
#undef TANDEM_ATOMIC_RMW

}  // extern "C"
