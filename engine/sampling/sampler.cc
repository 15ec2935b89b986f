#include "engine/sampling/sampler.h"

#include "common/logging.h"
#include "engine/sampling/row_sampler.h"

namespace tandem::sampling {

Sampler::Sampler(int32_t vocab_size) : vocab_size_(vocab_size) {
  CHECK(vocab_size >= 1, "vocab_size %d must be >= 1", vocab_size);
}

Sampler::~Sampler() = default;

void Sampler::SampleBatch(std::span<const SamplingRow> rows, std::span<SampleResult> results,
                          ThreadPool* pool) {
  CHECK(rows.size() == results.size(), "%zu rows but %zu results", rows.size(), results.size());
  if (rows.empty()) return;
  const size_t num_threads = pool != nullptr ? static_cast<size_t>(pool->num_threads()) : 1;
  while (row_samplers_.size() < num_threads) {
    row_samplers_.push_back(std::make_unique<RowSampler>(vocab_size_));
  }
  auto run = [&](int thread_index, int64_t begin, int64_t end) {
    RowSampler& sampler = *row_samplers_[static_cast<size_t>(thread_index)];
    for (int64_t i = begin; i < end; ++i) {
      sampler.Sample(rows[static_cast<size_t>(i)], &results[static_cast<size_t>(i)]);
    }
  };
  if (pool == nullptr) {
    run(0, 0, static_cast<int64_t>(rows.size()));
  } else {
    pool->ParallelFor(static_cast<int64_t>(rows.size()), /*min_chunk=*/1, run);
  }
}

}  // namespace tandem::sampling
