// Test helpers for WorkerGroupPool and its scheduler loops: replicas that own
// their model (so several run at once, one per scheduler thread), a group
// that fails chosen steps, a fixture with the tokenizer, and an observer that
// collects finished requests from the scheduler threads.
#ifndef TANDEM_TESTS_UNIT_COORDINATOR_CLUSTER_POOL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_COORDINATOR_CLUSTER_POOL_TEST_UTIL_H_

#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/api/request.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/worker_group.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::coordinator {

// A replica that owns its model (LocalWorkerGroup only borrows one).
class OwnedLocalGroup : public WorkerGroup {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Create(int32_t block_size) {
    auto owned = std::unique_ptr<OwnedLocalGroup>(new OwnedLocalGroup());
    model::ModelOptions options;
    options.num_threads = 1;
    auto m = model::Model::Load(testing::DefaultModelPath(), options);
    if (!m.ok()) return m.status();
    owned->model_ = *std::move(m);
    worker::StepExecutorConfig config;
    config.num_blocks = 256;
    config.block_size = block_size;
    auto g = LocalWorkerGroup::Create(owned->model_.get(), config);
    if (!g.ok()) return g.status();
    owned->group_ = *std::move(g);
    return std::unique_ptr<WorkerGroup>(std::move(owned));
  }
  const WorkerGroupInfo& info() const override { return group_->info(); }
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    return group_->Step(plan);
  }

 private:
  OwnedLocalGroup() = default;
  std::unique_ptr<model::Model> model_;  // outlives group_ (declared first)
  std::unique_ptr<LocalWorkerGroup> group_;
};

// Fails the steps `fails(n)` picks (n counts from 1) as a lost worker would
// (UNAVAILABLE); runs the others on `inner`. Scheduler thread only.
class FailingGroup : public WorkerGroup {
 public:
  FailingGroup(std::unique_ptr<WorkerGroup> inner, std::function<bool(int)> fails)
      : inner_(std::move(inner)), fails_(std::move(fails)) {}
  const WorkerGroupInfo& info() const override { return inner_->info(); }
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    if (fails_(++steps_)) return absl::UnavailableError("injected: the worker is gone");
    return inner_->Step(plan);
  }

 private:
  std::unique_ptr<WorkerGroup> inner_;
  std::function<bool(int)> fails_;
  int steps_ = 0;
};

// A fixture holding the default model's tokenizer (what a pool's schedulers
// detokenize with), loaded once per suite.
class PoolTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = gguf::GgufFile::Open(testing::DefaultModelPath());
    ASSERT_TRUE(file.ok()) << file.status();
    auto vocab = tokenizer::LoadVocabFromGguf(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    tokenizer_ = tokenizer::Tokenizer::Create(*vocab)->release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  static inline tokenizer::Tokenizer* tokenizer_ = nullptr;
};

// Collects finished requests from the scheduler threads.
class Finished : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta&) override {}
  void OnFinished(const RequestOutput& o) override {
    absl::MutexLock lock(&mutex_);
    outputs_[o.id.value()] = o;
  }
  // Waits (bounded) until request `id` finished; false on timeout (generous:
  // the sanitizer builds run these tests many times slower).
  bool Wait(int64_t id, absl::Duration timeout = absl::Minutes(5)) {
    absl::MutexLock lock(&mutex_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return outputs_.contains(id); };
    return mutex_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  // Request `id`'s output (it must have finished).
  RequestOutput Get(int64_t id) {
    absl::MutexLock lock(&mutex_);
    return outputs_.at(id);
  }

 private:
  absl::Mutex mutex_;
  std::map<int64_t, RequestOutput> outputs_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_TESTS_UNIT_COORDINATOR_CLUSTER_POOL_TEST_UTIL_H_
