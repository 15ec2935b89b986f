// The order in which the emulator runs a block's threads between sync points,
// and its blocks within a grid. CUDA promises no order, so a kernel whose
// result changes with the order has a missing barrier; running tests under
// several orders shows it.
//
//   sequential   the lowest-numbered runnable thread (and block) first
//   reverse      the highest first
//   random:SEED  a uniformly random runnable thread at every switch, from a
//                generator seeded by SEED and the block index (reproducible)
//
// The order comes from SetExecutionOrder when called, else from the
// environment variable TANDEM_CUDA_EMU_ORDER (read once), else sequential.
//
// Thread-safety: all functions are thread-safe.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_EXECUTION_ORDER_H_
#define TANDEM_KERNELS_CUDA_EMULATION_EXECUTION_ORDER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::cuda_emu {

struct ExecutionOrder {
  enum class Kind { kSequential, kReverse, kRandom };
  Kind kind = Kind::kSequential;
  uint64_t seed = 0;  // kRandom only
};

// Parses "sequential", "reverse" or "random:SEED" (SEED a decimal uint64);
// INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<ExecutionOrder> ParseExecutionOrder(std::string_view text);

// The text ParseExecutionOrder reads back as `order`.
std::string ExecutionOrderName(const ExecutionOrder& order);

// Overrides the environment for every later launch in this process.
void SetExecutionOrder(const ExecutionOrder& order);

// The order in force. Aborts with the offending text when
// TANDEM_CUDA_EMU_ORDER is set but does not parse: a test run in the wrong
// order would pass for the wrong reason.
ExecutionOrder CurrentExecutionOrder();

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_EXECUTION_ORDER_H_
