// AdmittedRequest: a generation request that RequestAdmission admitted into a
// worker group's scheduler, as the front end serving its call (a gRPC
// reactor, an HTTP session) holds it.
//
// Thread-safety: Cancel may be called from any thread.
#ifndef TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_
#define TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_

#include <memory>
#include <string_view>

#include "common/strong_id.h"
#include "coordinator/cluster/worker_group_pool.h"

namespace tandem::coordinator {

struct AdmittedRequest {
  RequestId id;
  // The group it was admitted to, held until the call is over: the group
  // outlives its request even if discovery drops the group meanwhile (a
  // request that migrates is tracked, and its new group held, by the pool).
  std::shared_ptr<WorkerGroupEntry> group;
  WorkerGroupPool* pool = nullptr;

  // Cancels the request wherever it runs (WorkerGroupPool::Cancel), logging
  // `why`. Never blocks: the scheduler drops the request at its next step
  // and reports it finished.
  void Cancel(std::string_view why) const;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_
