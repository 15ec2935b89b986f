#include "coordinator/cluster/draft_worker_set.h"

#include "draft/api/speculative_spec.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/grpc/grpc_api_key.h"
#include "common/grpc/internal_channel.h"
#include "common/logging.h"

namespace tandem::coordinator {

void DraftWorkerSet::Authorize(grpc::ClientContext& context) const {
  AttachApiKey(context, api_key_);
}

absl::StatusOr<std::string> DraftWorkerSet::CheckWorker(Worker& worker,
                                                        absl::Duration timeout) const {
  if (!worker.channel->WaitForConnected(GrpcDeadlineAfter(timeout))) {
    return absl::UnavailableError(absl::StrFormat("draft worker at %s: not reachable within %s",
                                                  worker.address, absl::FormatDuration(timeout)));
  }
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadlineAfter(timeout));
  Authorize(context);
  tandem::v1::DraftInfoRequest request;
  tandem::v1::DraftInfoResponse response;
  grpc::Status status = worker.stub->Info(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrFormat("draft worker at %s: Info failed: %s",
                                                  worker.address, status.error_message()));
  }
  if (response.vocab_size() != vocab_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft worker at %s serves '%s' with %d vocabulary tokens but the target has %d; a draft "
        "must share the target's vocabulary",
        worker.address, response.model_name(), response.vocab_size(), vocab_size_));
  }
  return response.model_name();
}

void DraftWorkerSet::Reconcile(const std::vector<std::string>& addresses,
                               absl::Duration timeout) {
  const absl::flat_hash_set<std::string> wanted(addresses.begin(), addresses.end());
  std::vector<std::shared_ptr<Worker>> known;
  {
    absl::MutexLock lock(&mutex_);
    auto unlisted = [&](const std::shared_ptr<Worker>& w) {
      if (wanted.contains(w->address)) return false;
      TANDEM_LOG(kInfo, "draft worker %s is no longer listed: removed", w->address);
      return true;
    };
    workers_.erase(std::remove_if(workers_.begin(), workers_.end(), unlisted), workers_.end());
    known = workers_;
  }
  absl::flat_hash_set<std::string> present;
  for (const auto& worker : known) {
    present.insert(worker->address);
    absl::StatusOr<std::string> model = CheckWorker(*worker, timeout);
    absl::MutexLock lock(&mutex_);
    if (model.ok() != worker->healthy) {
      TANDEM_LOG(kInfo, "draft worker %s is %s", worker->address,
                 model.ok() ? "healthy again" : model.status().ToString());
    }
    worker->healthy = model.ok();
    if (model.ok()) worker->model_name = *model;
  }
  for (const std::string& address : addresses) {
    if (present.contains(address)) continue;
    auto worker = std::make_shared<Worker>();
    worker->address = address;
    worker->channel = grpc::CreateCustomChannel(address, InternalChannelCredentials(tls_ca_pem_),
                                                InternalChannelArguments());
    worker->stub = tandem::v1::Draft::NewStub(worker->channel);
    absl::StatusOr<std::string> model = CheckWorker(*worker, timeout);
    if (!model.ok()) {
      // Kept (unhealthy) so it is retried without logging every round.
      TANDEM_LOG(kError, "draft worker %s not usable yet: %s", address, model.status().ToString());
    } else {
      worker->model_name = *model;
      worker->healthy = true;
      TANDEM_LOG(kInfo, "draft worker %s joined (%s)", address, *model);
    }
    absl::MutexLock lock(&mutex_);
    workers_.push_back(std::move(worker));
  }
}

std::vector<DraftWorkerStatusSnapshot> DraftWorkerSet::Statuses() const {
  std::vector<DraftWorkerStatusSnapshot> out;
  absl::MutexLock lock(&mutex_);
  for (const auto& w : workers_) out.push_back({w->address, w->healthy, w->model_name});
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> DraftWorkerSet::Healthy(
    std::string_view requested_kind) const {
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> out;
  absl::MutexLock lock(&mutex_);
  for (const auto& w : workers_) {
    if (!w->healthy) continue;
    if (!requested_kind.empty() &&
        !draft::DraftKindMatches(requested_kind, draft::DraftKindOfName(w->model_name))) {
      continue;
    }
    out.emplace_back(w->address, w->channel);
  }
  return out;
}

void DraftWorkerSet::MarkUnhealthy(const std::string& address) {
  absl::MutexLock lock(&mutex_);
  for (const auto& w : workers_) {
    if (w->address == address && w->healthy) {
      w->healthy = false;
      TANDEM_LOG(kError, "draft worker %s failed a call; unused until it answers again", address);
    }
  }
}

int32_t DraftWorkerSet::num_healthy() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int32_t>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return w->healthy; }));
}

}  // namespace tandem::coordinator
