#include "coordinator/cluster/worker_group_pool.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::coordinator {

WorkerGroupPool::WorkerGroupPool(const SchedulerConfig& scheduler_config,
                                 const RouterConfig& router_config,
                                 const tokenizer::Tokenizer* tokenizer, RequestObserver* observer,
                                 Connector connector, DraftPoolFactory draft_pools,
                                 const SpeculationConfig& speculation)
    : scheduler_config_(scheduler_config),
      tokenizer_(tokenizer),
      observer_(observer),
      connector_(std::move(connector)),
      draft_pools_(std::move(draft_pools)),
      speculation_(speculation),
      router_(router_config) {
  absl::Status status = ValidateSchedulerConfig(scheduler_config);
  CHECK(status.ok(), "%s", status.ToString());
}

WorkerGroupPool::~WorkerGroupPool() {
  std::vector<std::shared_ptr<WorkerGroupEntry>> entries;
  {
    absl::MutexLock lock(&mutex_);
    entries.swap(entries_);
  }
  for (auto& entry : entries) entry->loop->Shutdown();
}

absl::Status WorkerGroupPool::set_migration(int32_t max_migrations, absl::Duration timeout) {
  if (max_migrations < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_migrations %d is out of range: must be >= 0", max_migrations));
  }
  if (timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "migration timeout %s is out of range: must be >= 0", absl::FormatDuration(timeout)));
  }
  absl::MutexLock lock(&mutex_);
  loop_options_.migrator = this;
  loop_options_.max_migrations = max_migrations;
  loop_options_.migration_timeout = timeout;
  return absl::OkStatus();
}

absl::Status WorkerGroupPool::Add(const std::string& name, Connected connected) {
  const WorkerGroupInfo& info = connected.group->info();
  if (info.vocab_size != tokenizer_->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker group %s's vocabulary has %d tokens but the coordinator's tokenizer has %d", name,
        info.vocab_size, tokenizer_->vocab_size()));
  }
  auto entry = std::make_shared<WorkerGroupEntry>();
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& e : entries_) {
      if (e->name == name) {
        return absl::AlreadyExistsError(
            absl::StrFormat("worker group %s is already in the pool", name));
      }
    }
    if (info_.has_value() &&
        (info.model_name != info_->model_name || info.context_length != info_->context_length ||
         info.block_size != info_->block_size)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "worker group %s serves '%s' (context %d, block size %d) but %s serves '%s' "
          "(context %d, block size %d); every group must be a replica of one model",
          name, info.model_name, info.context_length, info.block_size, first_name_,
          info_->model_name, info_->context_length, info_->block_size));
    }
    if (!info_.has_value()) {
      info_ = info;
      first_name_ = name;
    }
    entry->id = next_id_++;
  }
  entry->name = name;
  entry->remote = connected.remote;
  entry->group = std::move(connected.group);
  entry->scheduler =
      std::make_unique<Scheduler>(scheduler_config_, entry->group.get(), tokenizer_, observer_);
  if (draft_pools_) {
    entry->drafts = draft_pools_();
    entry->scheduler->set_draft_pool(entry->drafts.get(), speculation_);
  }
  SchedulerLoopOptions loop_options;
  {
    absl::MutexLock lock(&mutex_);
    loop_options = loop_options_;
  }
  entry->loop =
      std::make_unique<SchedulerLoop>(entry->scheduler.get(), entry->remote, loop_options);
  TANDEM_LOG(kInfo, "worker group %s joined (%s, %d KV blocks of %d tokens)", name,
             info.model_name, info.num_blocks, info.block_size);
  absl::MutexLock lock(&mutex_);
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

void WorkerGroupPool::Reconcile(const std::vector<std::string>& addresses,
                                absl::Duration connect_timeout) {
  const absl::flat_hash_set<std::string> wanted(addresses.begin(), addresses.end());
  std::vector<std::string> to_connect;
  {
    absl::MutexLock lock(&mutex_);
    absl::flat_hash_set<std::string> present;
    for (const auto& entry : entries_) {
      present.insert(entry->name);
      const bool listed = wanted.contains(entry->name);
      if (!listed && !entry->draining.exchange(true)) {
        TANDEM_LOG(kInfo, "worker group %s is no longer listed: draining (%d requests left)",
                   entry->name, entry->loop->load());
      } else if (listed && entry->draining.exchange(false)) {
        TANDEM_LOG(kInfo, "worker group %s is listed again: taking requests", entry->name);
      }
    }
    for (const std::string& address : addresses) {
      if (!present.contains(address)) to_connect.push_back(address);
    }
  }
  for (const std::string& address : to_connect) {
    absl::StatusOr<Connected> connected = connector_(address, connect_timeout);
    absl::Status status = connected.ok() ? Add(address, *std::move(connected)) : connected.status();
    absl::MutexLock lock(&mutex_);
    if (status.ok()) {
      failing_.erase(address);
    } else if (failing_.insert(address).second) {
      TANDEM_LOG(kError, "worker group %s not added (retrying): %s", address, status.ToString());
    }
  }
  Reap();
}

void WorkerGroupPool::Reap() {
  std::vector<std::shared_ptr<WorkerGroupEntry>> removed;
  {
    absl::MutexLock lock(&mutex_);
    auto idle = [](const std::shared_ptr<WorkerGroupEntry>& e) {
      return e->draining.load() && e->loop->load() == 0;
    };
    for (const auto& entry : entries_) {
      if (idle(entry)) removed.push_back(entry);
    }
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), idle), entries_.end());
  }
  for (const auto& entry : removed) {
    router_.Forget(entry->id);
    TANDEM_LOG(kInfo, "worker group %s drained and removed", entry->name);
  }
  // `removed` releases the entries here (or when their last handler does).
}

absl::StatusOr<std::shared_ptr<WorkerGroupEntry>> WorkerGroupPool::Route(
    std::span<const int32_t> prompt) {
  std::vector<GroupLoad> loads;
  std::vector<std::shared_ptr<WorkerGroupEntry>> candidates;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& entry : entries_) {
      if (entry->draining.load()) continue;
      loads.push_back({entry->id, entry->name, entry->loop->load(), entry->loop->healthy(),
                       entry->loop->suspect()});
      candidates.push_back(entry);
    }
  }
  absl::StatusOr<int64_t> chosen = router_.Choose(prompt, loads);
  if (!chosen.ok()) return chosen.status();
  for (auto& entry : candidates) {
    if (entry->id == *chosen) return entry;
  }
  return absl::InternalError(absl::StrFormat("router chose unknown group id %d", *chosen));
}

absl::Status WorkerGroupPool::Submit(const std::shared_ptr<WorkerGroupEntry>& group,
                                     GenerateRequest request) {
  const RequestId id = request.id;
  // Tracked before it is submitted (under the lock, so a migration of it
  // waits), untracked when refused.
  absl::MutexLock lock(&tracked_mutex_);
  tracked_[id] = TrackedRequest{group, false};
  absl::Status status = group->loop->Submit(std::move(request));
  if (!status.ok()) tracked_.erase(id);
  return status;
}

void WorkerGroupPool::Cancel(RequestId id) {
  absl::MutexLock lock(&tracked_mutex_);
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  it->second.cancelled = true;
  it->second.group->loop->Cancel(id);
}

void WorkerGroupPool::Forget(RequestId id) {
  std::shared_ptr<WorkerGroupEntry> last;  // released outside the lock
  absl::MutexLock lock(&tracked_mutex_);
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  last = std::move(it->second.group);
  tracked_.erase(it);
}

RequestMigrator::Placement WorkerGroupPool::Place(MigratingRequest& request) {
  absl::MutexLock lock(&tracked_mutex_);
  auto it = tracked_.find(request.id());
  // Untracked: its call is over, nobody waits for the result.
  if (it == tracked_.end() || it->second.cancelled) return Placement::kCancelled;
  absl::StatusOr<std::shared_ptr<WorkerGroupEntry>> group = Route(request.prompt_tokens());
  if (!group.ok()) return Placement::kNoGroup;
  TANDEM_LOG(kInfo, "request %d moves to worker group %s", request.id().value(), (*group)->name);
  // The group it leaves is still in entries_ (its loop counts the request
  // in load() until this returns, so Reap keeps it): this never drops the
  // calling loop's last reference.
  it->second.group = *group;
  (*group)->loop->Resume(std::move(request));
  return Placement::kPlaced;
}

std::optional<WorkerGroupInfo> WorkerGroupPool::info() const {
  absl::MutexLock lock(&mutex_);
  return info_;
}

int32_t WorkerGroupPool::num_groups() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int32_t>(entries_.size());
}

std::vector<WorkerGroupStatusSnapshot> WorkerGroupPool::Statuses() const {
  std::vector<WorkerGroupStatusSnapshot> out;
  absl::MutexLock lock(&mutex_);
  for (const auto& entry : entries_) {
    WorkerGroupStatusSnapshot s;
    s.name = entry->name;
    s.healthy = entry->loop->healthy() && !entry->loop->suspect();
    s.draining = entry->draining.load();
    s.load = entry->loop->load();
    s.stats = entry->loop->snapshot();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tandem::coordinator
