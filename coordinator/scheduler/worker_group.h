// WorkerGroup: one model replica as the scheduler sees it — run one step over
// a batch. Implemented in-process (LocalWorkerGroup, for `tandem run` and fast
// tests) and over gRPC (cluster issue); the scheduler is written once against
// this interface (DESIGN.md "One scheduler, two wirings").
#ifndef TANDEM_COORDINATOR_SCHEDULER_WORKER_GROUP_H_
#define TANDEM_COORDINATOR_SCHEDULER_WORKER_GROUP_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/api/step_plan.h"

namespace tandem::coordinator {

struct WorkerGroupInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  int32_t num_blocks = 0;  // KV blocks the group's storage holds
  int32_t block_size = 0;
};

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  virtual const WorkerGroupInfo& info() const = 0;
  // Runs one step. An error means the step did not happen (the scheduler
  // fails the affected requests); UNAVAILABLE means the group is lost.
  virtual absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) = 0;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_WORKER_GROUP_H_
