// One emulated CUDA thread's execution context: a Boost.Context fiber with
// its own stack (guard page below it), announced to TSan and ASan on every
// switch (sanitizer_hooks.h). The scheduler Resume()s it; the code running
// inside it Suspend()s back to the scheduler.
//
// Under TSan each fiber has a TSan fiber context. Contexts and stacks are
// recycled (creating them dominated short kernels), but only once the block
// that used them has ended (EndOfBlock): a context carries its history, and
// within a block reuse would order a thread after one that exited before it
// started. The switches never synchronize; a fiber's body must acquire
// whatever its creator published (block_runner does, at thread start).
//
// Thread-safety: a ThreadFiber is created, resumed and destroyed on one OS
// thread and never migrates (thread_local storage, e.g. static __shared__
// variables, stays that of the block's OS thread).
#ifndef TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_
#define TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_

#include <cstddef>
#include <functional>
#include <memory>

namespace tandem::cuda_emu {

class ThreadFiber {
 public:
  // Creates the fiber; `body` starts at the first Resume(). body must
  // return normally (the emulator aborts the process on kernel misuse
  // instead of unwinding).
  ThreadFiber(std::size_t stack_bytes, std::function<void()> body);
  // Requires finished().
  ~ThreadFiber();
  ThreadFiber(const ThreadFiber&) = delete;
  ThreadFiber& operator=(const ThreadFiber&) = delete;

  // From the scheduler: runs the body until it Suspend()s or returns.
  void Resume();
  // From inside the body: back to the Resume() caller.
  void Suspend();
  bool finished() const;

  // Called by the scheduler after a block's last fiber is destroyed: the
  // stacks and TSan contexts of this OS thread's destroyed fibers may be
  // reused.
  static void EndOfBlock();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_
