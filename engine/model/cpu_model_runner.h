// CpuModelRunner: a Model run by the CPU kernels over a KvStorage in host
// memory. Thread-safety: as ModelRunner.
#ifndef TANDEM_ENGINE_MODEL_CPU_MODEL_RUNNER_H_
#define TANDEM_ENGINE_MODEL_CPU_MODEL_RUNNER_H_

#include <memory>

#include "engine/kv/kv_storage.h"
#include "engine/model/model_runner.h"

namespace tandem::model {

class CpuModelRunner : public ModelRunner {
 public:
  // `model` (not owned) must outlive the runner. It starts without a cache.
  explicit CpuModelRunner(Model* model) : model_(model) {}

  Model& model() override { return *model_; }
  const char* device_name() const override { return "cpu"; }
  // Fails as KvStorage::Create.
  absl::Status ResetKvCache(int32_t num_blocks, int32_t block_size) override;
  absl::Status CopyBlocks(std::span<const kv::BlockCopy> copies) override;
  absl::Status Forward(std::span<const ForwardSequence> batch, float* logits) override;

 private:
  Model* model_;
  std::unique_ptr<kv::KvStorage> storage_;
};

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_CPU_MODEL_RUNNER_H_
