// Under TSan this file is compiled without function entry/exit
// instrumentation (kernels/cuda/CMakeLists.txt): a switch starts in one TSan
// context and returns in another, so TSan's shadow call stacks would drift
// with every switch.
#include "kernels/cuda/emulation/thread_fiber.h"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/sanitizer_hooks.h"

namespace tandem::cuda_emu {
namespace {

// This OS thread's fiber resources for reuse: TSan contexts (costly to
// create) and stacks (mapping and unmapping them, and TSan's bookkeeping of
// that, dominated short kernels). `free` ones may be handed out; `retired`
// ones belong to finished fibers of the running block (see thread_fiber.h).
struct FiberResources {
  std::vector<void*> free_contexts;
  std::vector<void*> retired_contexts;
  std::vector<boost::context::stack_context> free_stacks;
  // Each retired stack with the lowest address its poison may start at.
  std::vector<std::pair<boost::context::stack_context, const char*>> retired_stacks;

  ~FiberResources() {
    EndOfBlock();
    for (void* context : free_contexts) sanitizer::DestroyFiber(context);
    for (boost::context::stack_context& stack : free_stacks) {
      boost::context::protected_fixedsize_stack(stack.size).deallocate(stack);
    }
  }
  void* TakeContext() {
    if (free_contexts.empty()) return sanitizer::CreateFiber();
    void* context = free_contexts.back();
    free_contexts.pop_back();
    return context;
  }
  void EndOfBlock() {
    free_contexts.insert(free_contexts.end(), retired_contexts.begin(), retired_contexts.end());
    retired_contexts.clear();
    for (auto& [stack, poison_from] : retired_stacks) {
      // Frames that never returned (the fiber's entry) left ASan poison.
      // Only that part is cleared: the whole stack's shadow (1 MiB / 8 per
      // CUDA thread) cost ~60% of an emulated launch under ASan.
      sanitizer::UnpoisonStack(poison_from, static_cast<const char*>(stack.sp) - poison_from);
      free_stacks.push_back(stack);
    }
    retired_stacks.clear();
  }
};

thread_local FiberResources fiber_resources;

// A Boost.Context stack allocator over fiber_resources' stacks (guard page
// below each) that also tells the fiber where its stack is: ASan needs the
// bounds of every stack it is switched to.
class RecyclingStack {
 public:
  // *exit_frame: where the fiber's body returned (null if it never did).
  RecyclingStack(std::size_t size, const void** bottom, std::size_t* bytes,
                 const char* const* exit_frame)
      : size_(size), bottom_(bottom), bytes_(bytes), exit_frame_(exit_frame) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context context;
    std::vector<boost::context::stack_context>& free = fiber_resources.free_stacks;
    if (!free.empty() && free.back().size >= size_) {
      context = free.back();
      free.pop_back();
    } else {
      context = boost::context::protected_fixedsize_stack(size_).allocate();
    }
    *bottom_ = static_cast<char*>(context.sp) - context.size;
    *bytes_ = context.size;
    return context;
  }
  // Boost deallocates a finished fiber's stack while the scheduler resumes
  // (ThreadFiber::Resume) and an unfinished one's when its State is
  // destroyed: both while *exit_frame_ is alive. After the body returned,
  // only the frames above ThreadFiber::State::Enter's (its caller, Boost's
  // fiber entry) are still poisoned; kExitSlack covers frame-address
  // imprecision. An unfinished fiber's whole stack is cleared.
  void deallocate(boost::context::stack_context& context) noexcept {
    constexpr std::ptrdiff_t kExitSlack = 16 * 1024;
    const char* bottom = static_cast<const char*>(context.sp) - context.size;
    const char* from = bottom;
    if (*exit_frame_ != nullptr && *exit_frame_ - kExitSlack > bottom) {
      from = *exit_frame_ - kExitSlack;
    }
    fiber_resources.retired_stacks.emplace_back(context, from);
  }

 private:
  std::size_t size_;
  const void** bottom_;
  std::size_t* bytes_;
  const char* const* exit_frame_;
};

}  // namespace

struct ThreadFiber::State {
  boost::context::fiber Enter(boost::context::fiber&& scheduler_fiber);

  std::function<void()> body;
  // Enter's frame once the body returned (declared before `self`, whose
  // destruction may deallocate the stack: RecyclingStack::deallocate).
  const char* exit_frame = nullptr;
  boost::context::fiber self;       // the suspended fiber; empty while it runs and once done
  boost::context::fiber scheduler;  // the suspended scheduler, while the fiber runs
  bool finished = false;
  // ASan: this fiber's stack, and the scheduler's as reported on entry.
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  const void* scheduler_stack_bottom = nullptr;
  std::size_t scheduler_stack_size = 0;
  void* scheduler_fake_stack = nullptr;
  void* fiber_fake_stack = nullptr;
  // TSan: this fiber's context and the scheduler's.
  void* tsan_fiber = nullptr;
  void* tsan_scheduler = nullptr;
};

ThreadFiber::ThreadFiber(std::size_t stack_bytes, std::function<void()> body)
    : state_(std::make_unique<State>()) {
  State* state = state_.get();
  state->body = std::move(body);
  state->self = boost::context::fiber(
      std::allocator_arg, RecyclingStack(stack_bytes, &state->stack_bottom, &state->stack_size,
                                          &state->exit_frame),
      [state](boost::context::fiber&& scheduler) { return state->Enter(std::move(scheduler)); });
  state->tsan_fiber = fiber_resources.TakeContext();
}

ThreadFiber::~ThreadFiber() {
  if (state_->tsan_fiber != nullptr) fiber_resources.retired_contexts.push_back(state_->tsan_fiber);
}

void ThreadFiber::EndOfBlock() { fiber_resources.EndOfBlock(); }

bool ThreadFiber::finished() const { return state_->finished; }

boost::context::fiber ThreadFiber::State::Enter(boost::context::fiber&& scheduler_fiber) {
  scheduler = std::move(scheduler_fiber);
  sanitizer::FinishSwitch(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
  body();
  finished = true;
  exit_frame = static_cast<const char*>(__builtin_frame_address(0));
  // nullptr: the fiber ends, so ASan may drop its fake stack.
  sanitizer::StartSwitch(nullptr, scheduler_stack_bottom, scheduler_stack_size);
  sanitizer::SwitchToFiber(tsan_scheduler);
  return std::move(scheduler);
}

void ThreadFiber::Resume() {
  State& s = *state_;
  s.tsan_scheduler = sanitizer::CurrentFiber();
  sanitizer::StartSwitch(&s.scheduler_fake_stack, s.stack_bottom, s.stack_size);
  sanitizer::SwitchToFiber(s.tsan_fiber);
  s.self = std::move(s.self).resume();
  sanitizer::FinishSwitch(s.scheduler_fake_stack, nullptr, nullptr);
}

void ThreadFiber::Suspend() {
  State& s = *state_;
  sanitizer::StartSwitch(&s.fiber_fake_stack, s.scheduler_stack_bottom, s.scheduler_stack_size);
  sanitizer::SwitchToFiber(s.tsan_scheduler);
  s.scheduler = std::move(s.scheduler).resume();
  sanitizer::FinishSwitch(s.fiber_fake_stack, &s.scheduler_stack_bottom, &s.scheduler_stack_size);
}

}  // namespace tandem::cuda_emu
