// Discovery: keeps a set of servers (worker groups or draft workers) in step
// with the targets that name them. Every `interval` its thread resolves each
// target (ResolveTarget) and hands the union of the addresses to `update`,
// which adds what appeared and drains what disappeared. A target whose
// resolver fails transiently (UNAVAILABLE) keeps its last known addresses, so
// a DNS hiccup never drains a healthy replica; a name that no longer exists
// (NOT_FOUND: the Service has no ready pod) contributes none.
//
// Thread-safety: Start and Shutdown from one thread (main); `update` runs on
// the calling thread in Start's first round, then on Discovery's thread only.
#ifndef TANDEM_COORDINATOR_CLUSTER_DISCOVERY_H_
#define TANDEM_COORDINATOR_CLUSTER_DISCOVERY_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/cluster/target_resolver.h"

namespace tandem::coordinator {

class Discovery {
 public:
  using Update = std::function<void(const std::vector<std::string>& addresses)>;

  // `what` names the servers in logs ("worker group", "draft worker").
  Discovery(std::string what, std::vector<Target> targets, absl::Duration interval,
            Update update);
  // Calls Shutdown().
  ~Discovery();
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  // Runs one round on the calling thread, then starts the thread that repeats
  // it every interval (fixed addresses too: `update` retries a server it
  // could not reach yet).
  void Start();
  // Stops and joins the thread (a round in progress finishes). Idempotent.
  void Shutdown();

  // The union of every target's current addresses, sorted (one round, without
  // calling `update`). Transient failures keep the target's last addresses.
  std::vector<std::string> Resolve();

 private:
  void Run();

  const std::string what_;
  const std::vector<Target> targets_;
  const absl::Duration interval_;
  const Update update_;
  std::vector<std::vector<std::string>> last_;  // [targets]; Start/Run thread only
  absl::Mutex mutex_;
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_DISCOVERY_H_
