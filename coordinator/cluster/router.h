// Router: chooses the worker group (replica) that serves a new request, by
// load and prefix affinity (DESIGN.md "router").
//
// Load is what each group's scheduler reports (requests queued or running).
// Affinity: per group, the router remembers a bounded LRU set of the chain
// keys (kv::PrefixCache::ChainKey) of the full prompt blocks it has routed
// there, so a request whose prompt starts with blocks a group has seen goes
// where their KV blocks are likely still cached. The group with the longest
// matching leading run of blocks wins, unless its load exceeds the least
// loaded healthy group's by more than `affinity_max_extra_load` (a hot prefix
// must not pile every request onto one group). Otherwise the least loaded
// healthy group wins; ties rotate round-robin. Unhealthy groups are never
// chosen, and their remembered keys are dropped (a reconnected worker starts
// with an empty cache); suspect ones only while every healthy group is.
//
// Groups come and go (discovery): each is named by a stable id, the caller
// passes the current set to every Choose, and Forget drops a removed
// group's keys.
//
// Thread-safety: every method may be called from any thread (one mutex).
#ifndef TANDEM_COORDINATOR_CLUSTER_ROUTER_H_
#define TANDEM_COORDINATOR_CLUSTER_ROUTER_H_

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tandem::coordinator {

struct RouterConfig {
  // Tokens per KV block; prompts are keyed per full block of this size.
  int32_t block_size = 16;
  // Chain keys remembered per group (least recently routed dropped first).
  int32_t max_keys_per_group = 1 << 16;
  // The affine group is chosen only while its load is at most this much
  // above the least loaded healthy group's.
  int64_t affinity_max_extra_load = 8;
};

// Validates `config`: INVALID_ARGUMENT naming the value and the limit.
absl::Status ValidateRouterConfig(const RouterConfig& config);

// A group as the router sees it when choosing (a snapshot).
struct GroupLoad {
  int64_t id = 0;        // stable while the group exists; never reused
  std::string name;      // e.g. its address, for errors
  int64_t load = 0;      // requests queued or running
  bool healthy = true;   // false while the group is broken / reconnecting
  // Its step in flight is overdue (it may be hung): chosen only while no
  // other group is healthy and clear, so a slow lone group still serves.
  bool suspect = false;
};

class Router {
 public:
  // `config` must pass ValidateRouterConfig (CHECKed).
  explicit Router(const RouterConfig& config);

  // Chooses among `groups` (the groups routable now, ids distinct) the one
  // for a request with `prompt`, returns its id and remembers the prompt's
  // full blocks for it. UNAVAILABLE, naming every group, when no group is
  // healthy (or there are none).
  absl::StatusOr<int64_t> Choose(std::span<const int32_t> prompt,
                                 std::span<const GroupLoad> groups);
  // Drops what was routed to group `id` (it was removed). No-op if unknown.
  void Forget(int64_t id);

  // Chain keys of the prompt's full blocks, in order.
  std::vector<uint64_t> BlockKeys(std::span<const int32_t> prompt) const;

 private:
  // A bounded LRU set of chain keys.
  struct KeySet {
    std::list<uint64_t> order;  // front = most recently routed
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> index;
  };

  // Leading blocks of `keys` that `set` holds.
  static int32_t MatchLength(const KeySet& set, std::span<const uint64_t> keys);
  void Remember(KeySet& set, std::span<const uint64_t> keys) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const RouterConfig config_;
  absl::Mutex mutex_;
  // Per group id; node-based so a KeySet's list iterators survive rehashing.
  absl::node_hash_map<int64_t, KeySet> keys_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_tie_ ABSL_GUARDED_BY(mutex_) = 0;      // round-robin cursor
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_ROUTER_H_
