#include "coordinator/cluster/discovery.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace tandem::coordinator {

Discovery::Discovery(std::string what, std::vector<Target> targets, absl::Duration interval,
                     Update update)
    : what_(std::move(what)),
      targets_(std::move(targets)),
      interval_(interval),
      update_(std::move(update)),
      last_(targets_.size()) {}

Discovery::~Discovery() { Shutdown(); }

std::vector<std::string> Discovery::Resolve() {
  std::vector<std::string> all;
  for (size_t i = 0; i < targets_.size(); ++i) {
    absl::StatusOr<std::vector<std::string>> found = ResolveTarget(targets_[i]);
    if (found.ok()) {
      if (*found != last_[i]) {
        TANDEM_LOG(kInfo, "%s target %s: %s", what_, targets_[i].spec,
                   found->empty() ? "no address" : absl::StrJoin(*found, ", "));
      }
      last_[i] = *std::move(found);
    } else if (absl::IsNotFound(found.status())) {
      if (!last_[i].empty()) TANDEM_LOG(kInfo, "%s", found.status().message());
      last_[i].clear();
    } else {
      TANDEM_LOG(kError, "%s; keeping its %d known addresses", found.status().message(),
                 last_[i].size());
    }
    all.insert(all.end(), last_[i].begin(), last_[i].end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

void Discovery::Start() {
  update_(Resolve());
  thread_ = std::thread([this] { Run(); });
}

void Discovery::Shutdown() {
  {
    absl::MutexLock lock(&mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Discovery::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mutex_);
      mutex_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
    }
    update_(Resolve());
  }
}

}  // namespace tandem::coordinator
