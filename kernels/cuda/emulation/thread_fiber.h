// One emulated CUDA thread's execution context: a Boost.Context fiber with
// its own stack (guard page below it), announced to TSan and ASan on every
// switch (sanitizer_hooks.h). The scheduler Resume()s it; the code running
// inside it Suspend()s back to the scheduler.
//
// Thread-safety: a ThreadFiber is created, resumed and destroyed on one OS
// thread and never migrates (thread_local storage, e.g. static __shared__
// variables, stays that of the block's OS thread).
#ifndef TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_
#define TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_

#include <cstddef>
#include <functional>

#include <boost/context/fiber.hpp>

namespace tandem::cuda_emu {

class ThreadFiber {
 public:
  // Creates the fiber; `body` starts at the first Resume(). body must
  // return normally (the emulator aborts the process on kernel misuse
  // instead of unwinding).
  ThreadFiber(std::size_t stack_bytes, std::function<void()> body);
  // Requires finished() or never resumed.
  ~ThreadFiber();
  ThreadFiber(const ThreadFiber&) = delete;
  ThreadFiber& operator=(const ThreadFiber&) = delete;

  // From the scheduler: runs the body until it Suspend()s or returns.
  void Resume();
  // From inside the body: back to the Resume() caller.
  void Suspend();
  bool finished() const { return finished_; }

 private:
  boost::context::fiber Enter(boost::context::fiber&& scheduler);

  std::function<void()> body_;
  boost::context::fiber self_;       // the suspended fiber, empty when running or done
  boost::context::fiber scheduler_;  // the suspended scheduler, while the fiber runs
  bool finished_ = false;
  // ASan: this fiber's stack, and the scheduler's as reported on entry.
  const void* stack_bottom_ = nullptr;
  std::size_t stack_size_ = 0;
  const void* scheduler_stack_bottom_ = nullptr;
  std::size_t scheduler_stack_size_ = 0;
  void* scheduler_fake_stack_ = nullptr;
  void* fiber_fake_stack_ = nullptr;
  // TSan: this fiber's context and the scheduler's.
  void* tsan_fiber_ = nullptr;
  void* tsan_scheduler_ = nullptr;
};

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_THREAD_FIBER_H_
