#include "coordinator/cluster/step_pace.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::coordinator {

absl::Status ValidateStepPaceConfig(const StepPaceConfig& config) {
  const std::pair<const char*, absl::Duration> durations[] = {
      {"initial step deadline", config.initial_deadline},
      {"step deadline floor", config.deadline_floor},
      {"suspect floor", config.suspect_floor}};
  for (const auto& [name, d] : durations) {
    if (d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s %s is out of range: must be > 0", name, absl::FormatDuration(d)));
    }
  }
  if (!(config.deadline_slack >= 1.0) || !(config.suspect_slack >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step deadline slack %g / suspect slack %g is out of range: each must be >= 1",
        config.deadline_slack, config.suspect_slack));
  }
  return absl::OkStatus();
}

StepPace::StepPace(const StepPaceConfig& config) : config_(config) {
  absl::Status status = ValidateStepPaceConfig(config);
  CHECK(status.ok(), "%s", status.ToString());
}

std::optional<absl::Duration> StepPace::ExpectedLocked(int64_t tokens) const {
  if (num_answered_ == 0) return std::nullopt;
  const double rate =
      *std::max_element(ms_per_token_.begin(), ms_per_token_.begin() + num_answered_);
  const double slowest = *std::max_element(ms_.begin(), ms_.begin() + num_answered_);
  return absl::Milliseconds(
      std::max(slowest, rate * static_cast<double>(std::max<int64_t>(tokens, 1))));
}

std::optional<absl::Duration> StepPace::Expected(int64_t tokens) const {
  absl::ReaderMutexLock lock(&mutex_);
  return ExpectedLocked(tokens);
}

absl::Duration StepPace::Deadline(int64_t tokens) const {
  std::optional<absl::Duration> expected = Expected(tokens);
  if (!expected.has_value()) return config_.initial_deadline;
  return config_.deadline_floor + config_.deadline_slack * *expected;
}

void StepPace::Begin(int64_t tokens, absl::Time now) {
  absl::MutexLock lock(&mutex_);
  in_flight_ = true;
  started_ = now;
  tokens_ = tokens;
}

void StepPace::End(absl::Time now, bool answered) {
  absl::MutexLock lock(&mutex_);
  if (in_flight_ && answered) {
    const double ms = absl::ToDoubleMilliseconds(now - started_);
    ms_[next_] = ms;
    ms_per_token_[next_] = ms / static_cast<double>(std::max<int64_t>(tokens_, 1));
    next_ = (next_ + 1) % kWindow;
    num_answered_ = std::min(num_answered_ + 1, kWindow);
  }
  in_flight_ = false;
}

bool StepPace::Suspect(absl::Time now) const {
  absl::ReaderMutexLock lock(&mutex_);
  if (!in_flight_) return false;
  std::optional<absl::Duration> expected = ExpectedLocked(tokens_);
  // Unmeasured: only the initial deadline says anything.
  const absl::Duration threshold =
      expected.has_value() ? config_.suspect_floor + config_.suspect_slack * *expected
                           : config_.initial_deadline;
  return now - started_ > threshold;
}

}  // namespace tandem::coordinator
