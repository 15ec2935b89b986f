// ThreadSanitizer builds only (linked into every test by tandem_test when
// TANDEM_SANITIZE=thread): tells TSan what absl::Mutex does. Debian's abseil
// is not built with -fsanitize=thread, so its Mutex synchronizes in code TSan
// cannot see, and every access guarded by an absl::Mutex would be reported as
// a race. These definitions take the place of the library's (the executable's
// symbols come first), call the library's own through dlsym(RTLD_NEXT) and
// add the acquire / release edges an instrumented abseil would report, per
// mutex. Conditions are evaluated inside abseil (by the waiter in Await /
// LockWhen, or by the thread releasing the mutex for its waiters in Unlock)
// with the mutex held by abseil's internals, unseen: reads made while inside
// those calls are ignored (they only read state the mutex guards; the
// callers' accesses before and after are ordered by the release / acquire). This adds the
// missing happens-before information; it suppresses no report.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

// TSan's dynamic annotations (exported by its runtime, not declared in
// sanitizer/tsan_interface.h).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);

namespace {

#define TANDEM_TSAN_STR2(x) #x
#define TANDEM_TSAN_STR(x) TANDEM_TSAN_STR2(x)

// The library's definition of absl::Mutex::<rest> (mangled after the inline
// namespace), or abort naming it.
void* Real(const char* rest) {
  const std::string ns = TANDEM_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + "5Mutex" + rest;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: %s not found\n", name.c_str());
    std::abort();
  }
  return f;
}

template <typename Fn>
Fn RealFn(const char* rest) {
  return reinterpret_cast<Fn>(Real(rest));
}

// Runs `call` (the library's LockWhen / Await*, which evaluate conditions
// inside, unseen) with reads ignored; `held`: the caller holds `mu` and the
// call may release it, so the caller's critical section so far is released
// first. Returns with `mu` acquired.
template <typename Call>
auto AroundCondition(void* mu, bool held, Call call) {
  if (held) __tsan_release(mu);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    __tsan_acquire(mu);
  } else {
    auto result = call();
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    __tsan_acquire(mu);
    return result;
  }
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = RealFn<void (*)(Mutex*)>("4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static const auto real = RealFn<void (*)(Mutex*)>("6UnlockEv");
  __tsan_release(this);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);  // it evaluates waiters' conditions
  real(this);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}

bool Mutex::TryLock() {
  static const auto real = RealFn<bool (*)(Mutex*)>("7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  static const auto real = RealFn<void (*)(Mutex*)>("10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = RealFn<void (*)(Mutex*)>("12ReaderUnlockEv");
  __tsan_release(this);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  real(this);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = RealFn<void (*)(Mutex*, const Condition&)>("8LockWhenERKNS0_9ConditionE");
  AroundCondition(this, /*held=*/false, [&] { real(this, cond); });
}

void Mutex::Await(const Condition& cond) {
  static const auto real = RealFn<void (*)(Mutex*, const Condition&)>("5AwaitERKNS0_9ConditionE");
  AroundCondition(this, /*held=*/true, [&] { real(this, cond); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = RealFn<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return AroundCondition(this, /*held=*/true, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = RealFn<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return AroundCondition(this, /*held=*/true, [&] { return real(this, cond, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
