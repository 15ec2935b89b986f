#include "client/step_overhead.h"

namespace tandem::client {

std::optional<StepOverhead> StepOverheadBetween(std::span<const GroupStepCounters> before,
                                                std::span<const GroupStepCounters> after) {
  StepOverhead total;
  for (const GroupStepCounters& now : after) {
    GroupStepCounters start;  // zeros: the group is new
    for (const GroupStepCounters& then : before) {
      if (then.address == now.address) {
        start = then;
        break;
      }
    }
    if (now.num_steps < start.num_steps || now.step_ms < start.step_ms ||
        now.worker_step_ms < start.worker_step_ms ||
        now.num_speculative_rounds < start.num_speculative_rounds) {
      start = GroupStepCounters();  // counters restarted: a new group at the same address
    }
    const int64_t num_steps = now.num_steps - start.num_steps;
    if (num_steps == 0) continue;
    ++total.num_groups;
    total.num_steps += num_steps;
    total.step_ms += now.step_ms - start.step_ms;
    total.worker_step_ms += now.worker_step_ms - start.worker_step_ms;
    total.num_speculative_rounds += now.num_speculative_rounds - start.num_speculative_rounds;
    total.num_draft_tokens += now.num_draft_tokens - start.num_draft_tokens;
    total.num_accepted_tokens += now.num_accepted_tokens - start.num_accepted_tokens;
  }
  if (total.num_steps == 0 || total.step_ms <= 0) return std::nullopt;
  return total;
}

}  // namespace tandem::client
