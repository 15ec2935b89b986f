// MpiThreadQueue: runs closures on the one thread that may call MPI. MPI is
// initialized MPI_THREAD_FUNNELED, so rank 0's collectives (the plan
// broadcast and the all-reduces inside Forward) must all run on the main
// thread, while gRPC calls Step/Reset from its own threads. Handlers Run()
// their work here and block until the main thread, sitting in Loop(), has
// run it.
//
// Thread-safety: Run and Stop from any thread; Loop from the MPI thread only.
#ifndef TANDEM_WORKER_TP_MPI_THREAD_QUEUE_H_
#define TANDEM_WORKER_TP_MPI_THREAD_QUEUE_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace tandem::tp {

class MpiThreadQueue {
 public:
  // Runs `task` on the Loop thread and returns true once it has run; false,
  // without running it, once Stop has been called.
  bool Run(absl::AnyInvocable<void()> task);
  // Runs queued tasks in order until Stop; tasks queued before Stop still run.
  void Loop();
  void Stop();

 private:
  struct Item {
    absl::AnyInvocable<void()> task;
    bool done = false;
  };
  bool HasWorkOrStopped() const ABSL_SHARED_LOCKS_REQUIRED(mutex_) {
    return stopped_ || !queue_.empty();
  }

  mutable absl::Mutex mutex_;
  std::deque<Item*> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopped_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace tandem::tp

#endif  // TANDEM_WORKER_TP_MPI_THREAD_QUEUE_H_
