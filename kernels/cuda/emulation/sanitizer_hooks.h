// The emulator's calls into ThreadSanitizer and AddressSanitizer, no-ops in
// builds without them. Internal to kernels/cuda/emulation.
//
// Under TSan each CUDA thread is a TSan fiber, switched to without
// synchronization, so the only happens-before edges between CUDA threads are
// the ones the barriers create with Release/Acquire on a per-barrier address.
// The emulator's own bookkeeping (shared by all fibers of a block, ordered by
// the scheduler rather than by barriers) runs between IgnoreBegin/IgnoreEnd so
// that TSan reports races in kernel code only.
//
// Under ASan every switch between stacks is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_SANITIZER_HOOKS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_SANITIZER_HOOKS_H_

#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#define TANDEM_CUDA_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TANDEM_CUDA_EMU_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_CUDA_EMU_ASAN 1
#endif
#endif

#ifdef TANDEM_CUDA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_ignore_thread_begin();  // exported by libtsan, not in its header
extern "C" void __tsan_ignore_thread_end();
#endif
#ifdef TANDEM_CUDA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace tandem::cuda_emu::sanitizer {

// Stack bytes per CUDA thread: instrumented frames are several times larger.
#if defined(TANDEM_CUDA_EMU_TSAN) || defined(TANDEM_CUDA_EMU_ASAN)
inline constexpr std::size_t kFiberStackBytes = 1024 * 1024;
#else
inline constexpr std::size_t kFiberStackBytes = 256 * 1024;
#endif

#ifdef TANDEM_CUDA_EMU_TSAN
inline void IgnoreBegin() { __tsan_ignore_thread_begin(); }
inline void IgnoreEnd() { __tsan_ignore_thread_end(); }
inline void Release(void* address) { __tsan_release(address); }
inline void Acquire(void* address) { __tsan_acquire(address); }
inline void* CurrentFiber() { return __tsan_get_current_fiber(); }
inline void* CreateFiber() { return __tsan_create_fiber(0); }
inline void DestroyFiber(void* fiber) { __tsan_destroy_fiber(fiber); }
inline void SwitchToFiber(void* fiber) {
  __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
}
#else
inline void IgnoreBegin() {}
inline void IgnoreEnd() {}
inline void Release(void*) {}
inline void Acquire(void*) {}
inline void* CurrentFiber() { return nullptr; }
inline void* CreateFiber() { return nullptr; }
inline void DestroyFiber(void*) {}
inline void SwitchToFiber(void*) {}
#endif

#ifdef TANDEM_CUDA_EMU_ASAN
inline void StartSwitch(void** fake_stack_save, const void* bottom, std::size_t size) {
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
}
inline void FinishSwitch(void* fake_stack_save, const void** bottom_old, std::size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
}
inline void UnpoisonStack(const void* bottom, std::size_t size) {
  __asan_unpoison_memory_region(bottom, size);
}
#else
inline void StartSwitch(void**, const void*, std::size_t) {}
inline void FinishSwitch(void*, const void**, std::size_t*) {}
inline void UnpoisonStack(const void*, std::size_t) {}
#endif

// Holds TSan's ignore state for one scope (emulator code, not kernel code).
class ScopedIgnore {
 public:
  ScopedIgnore() { IgnoreBegin(); }
  ~ScopedIgnore() { IgnoreEnd(); }
  ScopedIgnore(const ScopedIgnore&) = delete;
  ScopedIgnore& operator=(const ScopedIgnore&) = delete;
};

}  // namespace tandem::cuda_emu::sanitizer

#endif  // TANDEM_KERNELS_CUDA_EMULATION_SANITIZER_HOOKS_H_
