// LocalWorkerGroup: the in-process WorkerGroup — calls a StepExecutor on the
// caller's thread. Thread-safety: Step calls must be serialized.
#ifndef TANDEM_COORDINATOR_CLUSTER_LOCAL_WORKER_GROUP_H_
#define TANDEM_COORDINATOR_CLUSTER_LOCAL_WORKER_GROUP_H_

#include <memory>

#include "coordinator/scheduler/worker_group.h"
#include "worker/step_executor.h"

namespace tandem::coordinator {

class LocalWorkerGroup : public WorkerGroup {
 public:
  // `model` must outlive the group.
  static absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> Create(
      model::Model* model, const worker::StepExecutorConfig& config);

  const WorkerGroupInfo& info() const override { return info_; }
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    return executor_->Execute(plan);
  }

 private:
  LocalWorkerGroup(WorkerGroupInfo info, std::unique_ptr<worker::StepExecutor> executor)
      : info_(std::move(info)), executor_(std::move(executor)) {}

  WorkerGroupInfo info_;
  std::unique_ptr<worker::StepExecutor> executor_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_LOCAL_WORKER_GROUP_H_
