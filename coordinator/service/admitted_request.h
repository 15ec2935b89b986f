// AdmittedRequest: a generation request the Inference service admitted into a
// worker group's scheduler, as the reactor serving its call holds it; and how
// a call whose client went away is ended (ClientGoneStatus).
//
// Thread-safety: Cancel may be called from any thread.
#ifndef TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_
#define TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_

#include <memory>

#include "common/strong_id.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "grpcpp/grpcpp.h"

namespace tandem::coordinator {

struct AdmittedRequest {
  RequestId id;
  // Held until the call is over: the group outlives its request even if
  // discovery drops the group meanwhile.
  std::shared_ptr<WorkerGroupEntry> group;

  // Cancels the request in its scheduler, logging `why`. Never blocks: the
  // scheduler drops the request at its next step and reports it finished.
  void Cancel(const grpc::Status& why) const;
};

// The status that ends a call whose client is gone (gRPC cancelled it):
// DEADLINE_EXCEEDED once the call's deadline passed or is at most 250 ms away
// (gRPC cancels a call at its deadline, the client's copy first), CANCELLED
// otherwise.
grpc::Status ClientGoneStatus(const grpc::CallbackServerContext& context);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_ADMITTED_REQUEST_H_
