// The coordinator<->worker overhead of a `tandem bench` run: how much of the
// coordinator's step time was not spent inside the workers' steps (RPC,
// serialization and scheduling), from the cumulative per-group counters that
// ModelInfo reports, read before and after the run. Pure functions.
#ifndef TANDEM_CLIENT_STEP_OVERHEAD_H_
#define TANDEM_CLIENT_STEP_OVERHEAD_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace tandem::client {

// One worker group's cumulative step counters (ModelInfo's WorkerGroupStatus).
struct GroupStepCounters {
  std::string address;        // identifies the group between two readings
  int64_t num_steps = 0;      // scheduler steps run on the group
  double step_ms = 0;         // their wall time in the coordinator
  double worker_step_ms = 0;  // the part the workers reported spending inside them
  // Speculative decoding: verification rounds, drafts verified and accepted.
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
};

// What the run's steps cost, summed over every group.
struct StepOverhead {
  int32_t num_groups = 0;     // groups that ran at least one step in the run
  int64_t num_steps = 0;
  double step_ms = 0;
  double worker_step_ms = 0;
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;

  double mean_step_ms() const { return step_ms / static_cast<double>(num_steps); }
  double mean_worker_step_ms() const { return worker_step_ms / static_cast<double>(num_steps); }
  // (step_ms - worker_step_ms) / step_ms: the share of the coordinator's step
  // time that is overhead rather than the workers' forward and sampling.
  double overhead_share() const { return (step_ms - worker_step_ms) / step_ms; }
};

// The counters' growth from `before` to `after`, summed over groups matched
// by address. A group only in `after` (added during the run) counts from zero;
// one only in `before` (removed during the run) is left out, its last counts
// being unknown; a group whose counters went down was replaced, and counts
// from zero too. nullopt when no group ran a step with nonzero wall time in
// between — e.g. a server that reports no groups, or one that does not fill
// the counters — so that no share is computed from nothing.
std::optional<StepOverhead> StepOverheadBetween(std::span<const GroupStepCounters> before,
                                                std::span<const GroupStepCounters> after);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_STEP_OVERHEAD_H_
