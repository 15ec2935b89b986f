// StepPace: how long a remote worker group's steps take, learned from the
// steps it answered, and what that says about the step in flight — its
// deadline, and whether it is overdue (the group is then *suspect*: it gets
// no new requests until it answers).
//
// The cost model is deliberately pessimistic: a step of `tokens` tokens is
// expected to take the longer of the slowest of the last kWindow answered
// steps and tokens x the highest cost per token among them. Small decode
// batches have the highest cost per token, so prefill chunks get generous
// deadlines (a long prompt never trips them), and a step's fixed costs (a
// graph capture, an emulated device) are covered by the slowest step, while
// a stalled decode step is noticed within a few of its own durations. Until
// a step was answered the group's pace is unknown and the deadline is
// `initial_deadline` (a first step may load or warm a device).
//
// deadline(tokens) = deadline_floor + deadline_slack x expected(tokens)
// suspect once     now - start > suspect_floor + suspect_slack x expected
//
// The deadline's floor (60 s, as the fixed deadline was) is what a hung
// group's requests wait before they migrate; suspicion, which only steers
// routing and health, reacts within seconds.
//
// Thread-safety: Begin / End from the thread that runs the steps (one at a
// time); Suspect and ExpectedMs from any thread.
#ifndef TANDEM_COORDINATOR_CLUSTER_STEP_PACE_H_
#define TANDEM_COORDINATOR_CLUSTER_STEP_PACE_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::coordinator {

struct StepPaceConfig {
  absl::Duration initial_deadline = absl::Seconds(60);
  absl::Duration deadline_floor = absl::Seconds(60);
  double deadline_slack = 4.0;
  absl::Duration suspect_floor = absl::Seconds(1);
  double suspect_slack = 2.0;
};

// INVALID_ARGUMENT naming the value when a duration is not positive or a
// slack is below 1.
absl::Status ValidateStepPaceConfig(const StepPaceConfig& config);

class StepPace {
 public:
  static constexpr int kWindow = 16;

  // `config` must pass ValidateStepPaceConfig (CHECKed).
  explicit StepPace(const StepPaceConfig& config);

  // The expected duration of a step of `tokens` tokens; nullopt while no
  // step was answered.
  std::optional<absl::Duration> Expected(int64_t tokens) const;
  // The deadline of a step of `tokens` tokens, from its start.
  absl::Duration Deadline(int64_t tokens) const;

  // A step of `tokens` tokens starts at `now`.
  void Begin(int64_t tokens, absl::Time now);
  // The step in flight ended at `now`; `answered` records its cost.
  void End(absl::Time now, bool answered);
  // True while a step is in flight past its suspect threshold.
  bool Suspect(absl::Time now) const;

 private:
  std::optional<absl::Duration> ExpectedLocked(int64_t tokens) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  const StepPaceConfig config_;
  mutable absl::Mutex mutex_;
  // Milliseconds, and milliseconds per token, of the last answered steps
  // (rings written together).
  std::array<double, kWindow> ms_ ABSL_GUARDED_BY(mutex_){};
  std::array<double, kWindow> ms_per_token_ ABSL_GUARDED_BY(mutex_){};
  int32_t num_answered_ ABSL_GUARDED_BY(mutex_) = 0;  // at most kWindow
  int32_t next_ ABSL_GUARDED_BY(mutex_) = 0;          // the slot written next
  // The step in flight, if any.
  bool in_flight_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Time started_ ABSL_GUARDED_BY(mutex_);
  int64_t tokens_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_STEP_PACE_H_
