// SchedulerLoop: the scheduler thread. Owns one thread that runs
// Scheduler::Step() while there is work and sleeps on a condition when idle;
// Submit and Cancel wake it. The Scheduler (and everything it owns, through
// the RequestObserver callbacks) is touched only by that thread.
//
// Thread-safety: Submit, Cancel and Shutdown may be called from any thread.
#ifndef TANDEM_COORDINATOR_SCHEDULER_LOOP_H_
#define TANDEM_COORDINATOR_SCHEDULER_LOOP_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/scheduler.h"

namespace tandem::coordinator {

class SchedulerLoop {
 public:
  // Starts the thread. `scheduler` must outlive the loop (or its Shutdown).
  explicit SchedulerLoop(Scheduler* scheduler);
  // Calls Shutdown().
  ~SchedulerLoop();
  SchedulerLoop(const SchedulerLoop&) = delete;
  SchedulerLoop& operator=(const SchedulerLoop&) = delete;

  // Scheduler::Submit, then wakes the thread. Errors as Scheduler::Submit.
  absl::Status Submit(GenerateRequest request);
  // Scheduler::Cancel, then wakes the thread (the request's blocks are freed
  // in the next step).
  void Cancel(RequestId id);
  // Stops after the step in progress and joins the thread; requests still
  // queued or running are abandoned (callers drain first). Idempotent.
  void Shutdown();

 private:
  void Run();
  void Wake();

  Scheduler* scheduler_;
  absl::Mutex mutex_;
  bool wake_ ABSL_GUARDED_BY(mutex_) = false;
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_LOOP_H_
