// One decode step of the tiny model on the emulated device, counted
// (kernels/cuda/emulation/counters.h): what the step budget tests measure,
// with the runner they link (tandem_device_emulated for the runtime's
// counts, tandem_device_profiled for the kernels' memory accesses too).
#ifndef TANDEM_TESTS_UNIT_ENGINE_DEVICE_DECODE_STEP_COUNTS_H_
#define TANDEM_TESTS_UNIT_ENGINE_DEVICE_DECODE_STEP_COUNTS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/logging.h"
#include "engine/device/cuda_model_runner.h"
#include "engine/sampling/sampler.h"
#include "kernels/cuda/emulation/counters.h"
#include "tests/unit/engine/device/runner_test_util.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::device::testing {

inline constexpr int32_t kBlockSize = 16;
inline constexpr int32_t kPrompt = 8;  // tokens of each sequence's prefill

// The generated tiny model ($TANDEM_MODEL), weights on the device.
inline Model& DeviceModel() {
  static Model* m = [] {
    model::ModelOptions options;
    options.cpu_weights = false;
    auto loaded = Model::Load(::tandem::testing::DefaultModelPath(), options);
    CHECK(loaded.ok(), "%s", loaded.status().ToString());
    return loaded->release();
  }();
  return *m;
}

// `num_seqs` sequences of kPrompt tokens prefilled, then decoded greedily
// on the device; the third decode step (the first two capture its graph)
// is counted.
inline cuda_emu::CounterSnapshot CountDecodeStep(int32_t num_seqs) {
  CudaOptions options;
  options.weights = CudaWeights::kBf16;
  options.max_batched_tokens = std::max(64, num_seqs * kPrompt);
  options.cuda_graphs = true;
  auto runner = CudaModelRunner::Create(&DeviceModel(), options);
  CHECK(runner.ok(), "%s", runner.status().ToString());
  CudaModelRunner& r = **runner;
  CHECK(r.ResetKvCache(num_seqs + 1, kBlockSize).ok());
  CHECK(r.samples_on_device());
  const int32_t vocab = DeviceModel().config().vocab_size;
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<std::vector<BlockId>> tables(num_seqs);
  for (int32_t s = 0; s < num_seqs; ++s) tables[s] = {BlockId(s)};
  std::vector<std::vector<int32_t>> tokens(num_seqs);
  for (int32_t s = 0; s < num_seqs; ++s) tokens[s] = Tokens(kPrompt, s);
  cuda_emu::CounterSnapshot counted;
  for (int step = 0; step < 4; ++step) {
    std::vector<model::ForwardSequence> batch;
    std::vector<int64_t> logit_rows;
    std::vector<sampling::SamplingRow> rows;
    for (int32_t s = 0; s < num_seqs; ++s) {
      const int32_t start = step == 0 ? 0 : kPrompt + step - 1;
      batch.push_back({tokens[s], start, tables[s], 1});
      logit_rows.push_back(s);  // each sequence's one logits row
      rows.push_back({.params = &greedy, .seed = static_cast<uint64_t>(s)});
    }
    std::vector<float> host_logits(static_cast<size_t>(num_seqs) * vocab);
    std::vector<sampling::SampleResult> results(num_seqs);
    std::vector<int32_t> host_rows;
    if (step == 3) cuda_emu::EnableCounters();
    CHECK(r.ForwardSample(batch, logit_rows, rows, results, host_logits.data(), &host_rows).ok());
    if (step == 3) {
      counted = cuda_emu::ReadCounters();
      cuda_emu::DisableCounters();
    }
    CHECK(host_rows.empty());
    for (int32_t s = 0; s < num_seqs; ++s) tokens[s] = {results[s].token};
  }
  return counted;
}

}  // namespace tandem::device::testing

#endif  // TANDEM_TESTS_UNIT_ENGINE_DEVICE_DECODE_STEP_COUNTS_H_
