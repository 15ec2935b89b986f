#include "coordinator/cluster/router.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "engine/kv/prefix_cache.h"

namespace tandem::coordinator {

absl::Status ValidateRouterConfig(const RouterConfig& config) {
  if (config.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("router block_size %d is out of range: must be >= 1", config.block_size));
  }
  if (config.max_keys_per_group < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router max_keys_per_group %d is out of range: must be >= 1", config.max_keys_per_group));
  }
  if (config.affinity_max_extra_load < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("router affinity_max_extra_load %d is out of range: must be >= 0",
                        config.affinity_max_extra_load));
  }
  return absl::OkStatus();
}

Router::Router(const RouterConfig& config) : config_(config) {
  absl::Status status = ValidateRouterConfig(config);
  CHECK(status.ok(), "%s", status.ToString());
}

std::vector<uint64_t> Router::BlockKeys(std::span<const int32_t> prompt) const {
  std::vector<uint64_t> keys;
  const size_t bs = static_cast<size_t>(config_.block_size);
  uint64_t parent = kv::PrefixCache::kRootKey;
  for (size_t start = 0; start + bs <= prompt.size(); start += bs) {
    parent = kv::PrefixCache::ChainKey(parent, prompt.subspan(start, bs));
    keys.push_back(parent);
  }
  return keys;
}

int32_t Router::MatchLength(const KeySet& set, std::span<const uint64_t> keys) {
  int32_t n = 0;
  // Chain keys cover their whole prefix, so the run ends at the first miss.
  while (n < static_cast<int32_t>(keys.size()) && set.index.contains(keys[n])) ++n;
  return n;
}

void Router::Remember(KeySet& set, std::span<const uint64_t> keys) {
  for (uint64_t key : keys) {
    auto it = set.index.find(key);
    if (it != set.index.end()) {
      set.order.splice(set.order.begin(), set.order, it->second);
      continue;
    }
    set.order.push_front(key);
    set.index[key] = set.order.begin();
    if (static_cast<int32_t>(set.order.size()) > config_.max_keys_per_group) {
      set.index.erase(set.order.back());
      set.order.pop_back();
    }
  }
}

void Router::Forget(int64_t id) {
  absl::MutexLock lock(&mutex_);
  keys_.erase(id);
}

absl::StatusOr<int64_t> Router::Choose(std::span<const int32_t> prompt,
                                       std::span<const GroupLoad> groups) {
  const std::vector<uint64_t> keys = BlockKeys(prompt);
  const bool any_clear = std::any_of(groups.begin(), groups.end(),
                                     [](const GroupLoad& g) { return g.healthy && !g.suspect; });
  auto usable = [any_clear](const GroupLoad& g) {
    return g.healthy && (!g.suspect || !any_clear);
  };
  absl::MutexLock lock(&mutex_);
  int64_t min_load = std::numeric_limits<int64_t>::max();
  for (const GroupLoad& g : groups) {
    if (!g.healthy) {
      // Its worker restarts from an empty cache: forget what was routed there.
      keys_.erase(g.id);
      continue;
    }
    if (usable(g)) min_load = std::min(min_load, g.load);
  }
  if (min_load == std::numeric_limits<int64_t>::max()) {
    std::vector<std::string> names;
    for (const GroupLoad& g : groups) names.push_back(g.name);
    return absl::UnavailableError(absl::StrFormat(
        "no worker group is available: all %d (%s) are down or reconnecting", groups.size(),
        names.empty() ? "none known" : absl::StrJoin(names, ", ")));
  }
  const int32_t n = static_cast<int32_t>(groups.size());
  // The group with the longest leading match; the less loaded one on ties.
  int32_t affine = -1;
  int32_t best_match = 0;
  for (int32_t g = 0; g < n; ++g) {
    if (!usable(groups[g])) continue;
    auto it = keys_.find(groups[g].id);
    if (it == keys_.end()) continue;
    int32_t match = MatchLength(it->second, keys);
    if (match > best_match ||
        (match == best_match && match > 0 && groups[g].load < groups[affine].load)) {
      best_match = match;
      affine = g;
    }
  }
  int32_t chosen = -1;
  if (affine >= 0 && groups[affine].load <= min_load + config_.affinity_max_extra_load) {
    chosen = affine;
  } else {
    const int32_t start = static_cast<int32_t>(next_tie_ % static_cast<uint64_t>(n));
    for (int32_t i = 0; i < n && chosen < 0; ++i) {
      int32_t g = (start + i) % n;
      if (usable(groups[g]) && groups[g].load == min_load) chosen = g;
    }
    next_tie_ = static_cast<uint64_t>(chosen) + 1;
  }
  Remember(keys_[groups[chosen].id], keys);
  return groups[chosen].id;
}

}  // namespace tandem::coordinator
