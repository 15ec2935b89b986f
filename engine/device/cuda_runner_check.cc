// tandem_cuda_runner_check: proves that the CUDA backend of the model
// (CudaModelRunner over the nvcc-built kernels, the CUDA runtime and cuBLAS)
// links, and on a machine with a GPU runs one greedy step of a model:
//   tandem_cuda_runner_check MODEL.gguf [bf16|native]
// It loads the model for the device, creates the runner (weights uploaded,
// scratch sized for 64 tokens, 16 KV blocks), runs a 4-token prefill and
// prints the argmax token. Without a GPU it prints the CUDA error and exits
// 1; the build only needs it to link.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/device/cuda_model_runner.h"
#include "engine/model/model.h"

int main(int argc, char** argv) {
  using namespace tandem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [bf16|native]\n", argv[0]);
    return 2;
  }
  model::ModelOptions model_options;
  model_options.cpu_weights = false;
  absl::StatusOr<std::unique_ptr<model::Model>> model = model::Model::Load(argv[1], model_options);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  device::CudaOptions options;
  options.max_batched_tokens = 64;
  if (argc > 2) {
    absl::StatusOr<device::CudaWeights> weights = device::ParseCudaWeights(argv[2]);
    if (!weights.ok()) {
      std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
      return 2;
    }
    options.weights = *weights;
  }
  auto runner = device::CudaModelRunner::Create(model->get(), options);
  absl::Status status = runner.ok() ? (*runner)->ResetKvCache(16, 16) : runner.status();
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const std::vector<BlockId> table = {BlockId(0)};
  const model::ForwardSequence seq{tokens, 0, table, 1};
  std::vector<float> logits((*model)->config().vocab_size);
  if (status.ok()) status = (*runner)->Forward({&seq, 1}, logits.data());
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("%s on %s: argmax %d\n", (*model)->config().name.c_str(),
              (*runner)->device_name(),
              static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  return 0;
}
