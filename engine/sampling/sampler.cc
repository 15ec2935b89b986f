#include "engine/sampling/sampler.h"

#include "common/logging.h"
#include "engine/sampling/row_sampler.h"

namespace tandem::sampling {

Sampler::Sampler(int32_t vocab_size) : vocab_size_(vocab_size) {
  CHECK(vocab_size >= 1, "vocab_size %d must be >= 1", vocab_size);
}

Sampler::~Sampler() = default;

template <typename RowFn>
void Sampler::ForEachRow(size_t n, ThreadPool* pool, RowFn row_fn) {
  if (n == 0) return;
  const size_t num_threads = pool != nullptr ? static_cast<size_t>(pool->num_threads()) : 1;
  while (row_samplers_.size() < num_threads) {
    row_samplers_.push_back(std::make_unique<RowSampler>(vocab_size_));
  }
  auto run = [&](int thread_index, int64_t begin, int64_t end) {
    RowSampler& sampler = *row_samplers_[static_cast<size_t>(thread_index)];
    for (int64_t i = begin; i < end; ++i) row_fn(sampler, static_cast<size_t>(i));
  };
  if (pool == nullptr) {
    run(0, 0, static_cast<int64_t>(n));
  } else {
    pool->ParallelFor(static_cast<int64_t>(n), /*min_chunk=*/1, run);
  }
}

void Sampler::SampleBatch(std::span<const SamplingRow> rows, std::span<SampleResult> results,
                          ThreadPool* pool) {
  CHECK(rows.size() == results.size(), "%zu rows but %zu results", rows.size(), results.size());
  ForEachRow(rows.size(), pool,
             [&](RowSampler& sampler, size_t i) { sampler.Sample(rows[i], &results[i]); });
}

void Sampler::ScoreBatch(std::span<const ScoreRow> rows, std::span<SampleResult> results,
                         ThreadPool* pool) {
  CHECK(rows.size() == results.size(), "%zu rows but %zu results", rows.size(), results.size());
  for (const ScoreRow& row : rows) {
    CHECK(row.logits != nullptr && row.token >= 0 && row.token < vocab_size_,
          "score row: null logits or token %d outside [0, %d)", row.token, vocab_size_);
  }
  ForEachRow(rows.size(), pool, [&](RowSampler& sampler, size_t i) {
    results[i].token = rows[i].token;
    sampler.ComputeLogprobs(rows[i].logits, rows[i].num_top, &results[i]);
  });
}

}  // namespace tandem::sampling
