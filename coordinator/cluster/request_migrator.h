// RequestMigrator: where a SchedulerLoop sends the requests its scheduler
// evicted after a failed step (see Scheduler::set_evict_on_failure): to a
// healthy worker group that Resumes them. WorkerGroupPool implements it.
//
// Thread-safety: Place may be called from any scheduler thread.
#ifndef TANDEM_COORDINATOR_CLUSTER_REQUEST_MIGRATOR_H_
#define TANDEM_COORDINATOR_CLUSTER_REQUEST_MIGRATOR_H_

#include "coordinator/scheduler/scheduler.h"

namespace tandem::coordinator {

class RequestMigrator {
 public:
  enum class Placement {
    kPlaced,     // a group took it (`request` was moved from)
    kCancelled,  // its client cancelled or left: end it as cancelled
    kNoGroup,    // no healthy group can take it now: try again later
  };
  virtual ~RequestMigrator() = default;
  // Resumes `request` on the group the router picks among the healthy ones
  // (the failed group itself once it is healthy again).
  virtual Placement Place(MigratingRequest& request) = 0;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_REQUEST_MIGRATOR_H_
