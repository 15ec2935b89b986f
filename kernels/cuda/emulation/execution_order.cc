#include "kernels/cuda/emulation/execution_order.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::cuda_emu {
namespace {

std::mutex order_mutex;
std::optional<ExecutionOrder> order_override;  // guarded by order_mutex

ExecutionOrder OrderFromEnvironment() {
  const char* text = std::getenv("TANDEM_CUDA_EMU_ORDER");
  if (text == nullptr || *text == '\0') return ExecutionOrder{};
  absl::StatusOr<ExecutionOrder> order = ParseExecutionOrder(text);
  if (!order.ok()) {
    std::fprintf(stderr, "tandem cuda emulation: TANDEM_CUDA_EMU_ORDER: %s\n",
                 std::string(order.status().message()).c_str());
    std::abort();
  }
  return *order;
}

}  // namespace

absl::StatusOr<ExecutionOrder> ParseExecutionOrder(std::string_view text) {
  if (text == "sequential") return ExecutionOrder{ExecutionOrder::Kind::kSequential, 0};
  if (text == "reverse") return ExecutionOrder{ExecutionOrder::Kind::kReverse, 0};
  constexpr std::string_view kRandom = "random:";
  if (text.starts_with(kRandom)) {
    std::string_view digits = text.substr(kRandom.size());
    uint64_t seed = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
    if (!digits.empty() && error == std::errc() && end == digits.data() + digits.size()) {
      return ExecutionOrder{ExecutionOrder::Kind::kRandom, seed};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("execution order '", std::string(text),
                   "': expected sequential, reverse or random:SEED (SEED a decimal uint64)"));
}

std::string ExecutionOrderName(const ExecutionOrder& order) {
  switch (order.kind) {
    case ExecutionOrder::Kind::kSequential:
      return "sequential";
    case ExecutionOrder::Kind::kReverse:
      return "reverse";
    case ExecutionOrder::Kind::kRandom:
      return absl::StrCat("random:", order.seed);
  }
  return "?";
}

void SetExecutionOrder(const ExecutionOrder& order) {
  std::lock_guard<std::mutex> lock(order_mutex);
  order_override = order;
}

ExecutionOrder CurrentExecutionOrder() {
  static const ExecutionOrder from_environment = OrderFromEnvironment();
  std::lock_guard<std::mutex> lock(order_mutex);
  return order_override.value_or(from_environment);
}

}  // namespace tandem::cuda_emu
