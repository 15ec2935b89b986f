#include "kernels/cuda/emulation/thread_fiber.h"

#include <memory>
#include <utility>

#include <boost/context/protected_fixedsize_stack.hpp>

#include "kernels/cuda/emulation/sanitizer_hooks.h"

namespace tandem::cuda_emu {
namespace {

// protected_fixedsize_stack that also tells the ThreadFiber where its stack
// is (ASan needs the bounds of every stack it is switched to).
class RecordingStack {
 public:
  RecordingStack(std::size_t size, const void** bottom, std::size_t* bytes)
      : stack_(size), bottom_(bottom), bytes_(bytes) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context context = stack_.allocate();
    *bottom_ = static_cast<char*>(context.sp) - context.size;
    *bytes_ = context.size;
    return context;
  }
  void deallocate(boost::context::stack_context& context) noexcept { stack_.deallocate(context); }

 private:
  boost::context::protected_fixedsize_stack stack_;
  const void** bottom_;
  std::size_t* bytes_;
};

}  // namespace

ThreadFiber::ThreadFiber(std::size_t stack_bytes, std::function<void()> body)
    : body_(std::move(body)) {
  self_ = boost::context::fiber(
      std::allocator_arg, RecordingStack(stack_bytes, &stack_bottom_, &stack_size_),
      [this](boost::context::fiber&& scheduler) { return Enter(std::move(scheduler)); });
  // Created after the Boost fiber so that everything the creator wrote so far
  // (the fiber's record, the kernel's arguments) happens-before its body.
  tsan_fiber_ = sanitizer::CreateFiber();
}

ThreadFiber::~ThreadFiber() {
  if (tsan_fiber_ != nullptr) sanitizer::DestroyFiber(tsan_fiber_);
}

boost::context::fiber ThreadFiber::Enter(boost::context::fiber&& scheduler) {
  scheduler_ = std::move(scheduler);
  sanitizer::FinishSwitch(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_);
  body_();
  finished_ = true;
  // nullptr: the fiber ends, so ASan may drop its fake stack.
  sanitizer::StartSwitch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
  sanitizer::SwitchToFiber(tsan_scheduler_);
  return std::move(scheduler_);
}

void ThreadFiber::Resume() {
  tsan_scheduler_ = sanitizer::CurrentFiber();
  sanitizer::StartSwitch(&scheduler_fake_stack_, stack_bottom_, stack_size_);
  sanitizer::SwitchToFiber(tsan_fiber_);
  self_ = std::move(self_).resume();
  sanitizer::FinishSwitch(scheduler_fake_stack_, nullptr, nullptr);
}

void ThreadFiber::Suspend() {
  sanitizer::StartSwitch(&fiber_fake_stack_, scheduler_stack_bottom_, scheduler_stack_size_);
  sanitizer::SwitchToFiber(tsan_scheduler_);
  scheduler_ = std::move(scheduler_).resume();
  sanitizer::FinishSwitch(fiber_fake_stack_, &scheduler_stack_bottom_, &scheduler_stack_size_);
}

}  // namespace tandem::cuda_emu
