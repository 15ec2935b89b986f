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
  // The group runs `runner` (its model must outlive the group).
  static absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> Create(
      std::unique_ptr<model::ModelRunner> runner, const worker::StepExecutorConfig& config);
  // The same on the CPU; `model` must outlive the group.
  static absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> Create(
      model::Model* model, const worker::StepExecutorConfig& config);

  const WorkerGroupInfo& info() const override { return info_; }
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    return executor_->Execute(plan);
  }

 private:
  LocalWorkerGroup(WorkerGroupInfo info, std::unique_ptr<model::ModelRunner> runner,
                   std::unique_ptr<worker::StepExecutor> executor)
      : info_(std::move(info)), runner_(std::move(runner)), executor_(std::move(executor)) {}

  WorkerGroupInfo info_;
  std::unique_ptr<model::ModelRunner> runner_;  // declared first: the executor uses it
  std::unique_ptr<worker::StepExecutor> executor_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_LOCAL_WORKER_GROUP_H_
