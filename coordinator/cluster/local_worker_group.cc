#include "coordinator/cluster/local_worker_group.h"

#include "common/status_macros.h"

namespace tandem::coordinator {

absl::StatusOr<std::unique_ptr<LocalWorkerGroup>> LocalWorkerGroup::Create(
    model::Model* model, const worker::StepExecutorConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<worker::StepExecutor> executor,
                   worker::StepExecutor::Create(model, config));
  WorkerGroupInfo info;
  info.model_name = model->config().name;
  info.vocab_size = model->config().vocab_size;
  info.context_length = model->config().context_length;
  info.num_blocks = config.num_blocks;
  info.block_size = config.block_size;
  return std::unique_ptr<LocalWorkerGroup>(new LocalWorkerGroup(info, std::move(executor)));
}

}  // namespace tandem::coordinator
