#include "coordinator/cluster/local_worker_group.h"

#include "common/status_macros.h"
#include "engine/model/cpu_model_runner.h"

namespace tandem::coordinator {

absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> LocalWorkerGroup::Create(
    std::unique_ptr<model::ModelRunner> runner, const worker::StepExecutorConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<worker::StepExecutor> executor,
                   worker::StepExecutor::Create(runner.get(), config));
  const model::ModelConfig& mc = runner->model().config();
  WorkerGroupInfo info;
  info.model_name = mc.name;
  info.vocab_size = mc.vocab_size;
  info.context_length = mc.context_length;
  info.num_blocks = config.num_blocks;
  info.block_size = config.block_size;
  return std::unique_ptr<LocalWorkerGroup>(
      new LocalWorkerGroup(info, std::move(runner), std::move(executor)));
}

absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> LocalWorkerGroup::Create(
    model::Model* model, const worker::StepExecutorConfig& config) {
  return Create(std::make_unique<model::CpuModelRunner>(model), config);
}

}  // namespace tandem::coordinator
