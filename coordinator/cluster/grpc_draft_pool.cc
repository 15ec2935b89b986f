#include "coordinator/cluster/grpc_draft_pool.h"

#include <limits>
#include <random>

#include "common/grpc/internal_channel.h"
#include "common/logging.h"
#include "tandem/v1/draft.grpc.pb.h"
#include "protocol/draft_codec.h"

namespace tandem::coordinator {

GrpcDraftPool::GrpcDraftPool(DraftWorkerSet* workers, absl::Duration timeout)
    : workers_(workers),
      timeout_(timeout),
      id_base_(static_cast<int64_t>(std::random_device()() & 0x7FFFFFFFu) << 32) {}

bool GrpcDraftPool::Serves(std::string_view kind) const {
  return kind.empty() || !workers_->Healthy(kind).empty();
}

const GrpcDraftPool::Assigned* GrpcDraftPool::WorkerFor(SeqId seq, int32_t start_pos,
                                                        std::string_view kind) {
  auto it = assigned_.find(seq);
  if (it != assigned_.end()) {
    for (const auto& [address, channel] : workers_->Healthy()) {
      if (address == it->second.address) return &it->second;
    }
    return nullptr;  // its draft state is on a worker that is gone
  }
  auto healthy = workers_->Healthy(kind);
  if (start_pos != 0 || healthy.empty()) return nullptr;
  const std::pair<std::string, std::shared_ptr<grpc::Channel>>* best = nullptr;
  int64_t best_load = std::numeric_limits<int64_t>::max();
  for (const auto& h : healthy) {
    const int64_t load = load_[h.first];
    if (load < best_load) {
      best_load = load;
      best = &h;
    }
  }
  ++load_[best->first];
  return &(assigned_[seq] = Assigned{best->first, best->second});
}

void GrpcDraftPool::Unassign(SeqId seq) {
  auto it = assigned_.find(seq);
  if (it == assigned_.end()) return;
  auto load = load_.find(it->second.address);
  if (load != load_.end() && --load->second <= 0) load_.erase(load);
  assigned_.erase(it);
}

void GrpcDraftPool::Forget(const std::string& address) {
  for (auto it = assigned_.begin(); it != assigned_.end();) {
    if (it->second.address == address) {
      assigned_.erase(it++);
    } else {
      ++it;
    }
  }
  load_.erase(address);
}

std::vector<DraftProposal> GrpcDraftPool::Propose(std::span<const DraftRequest> requests) {
  std::vector<DraftProposal> out(requests.size());
  // One RPC per worker, carrying its sequences in request order.
  struct Call {
    const Assigned* worker;
    tandem::v1::ProposeRequest request;
    std::vector<size_t> index;  // into `requests`
  };
  absl::flat_hash_map<std::string, Call> calls;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    const Assigned* worker = WorkerFor(r.seq, r.start_pos, r.kind);
    if (worker == nullptr) {
      out[i].ok = false;
      continue;
    }
    Call& call = calls[worker->address];
    call.worker = worker;
    call.index.push_back(i);
    protocol::DraftRequestToProto(r, WireId(r.seq), call.request.add_sequences());
  }
  for (auto& [address, call] : calls) {
    auto stub = tandem::v1::Draft::NewStub(call.worker->channel);
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadlineAfter(timeout_));
  workers_->Authorize(context);
    tandem::v1::ProposeResponse response;
    grpc::Status status = stub->Propose(&context, call.request, &response);
    if (!status.ok() || response.proposals_size() != static_cast<int>(call.index.size())) {
      TANDEM_LOG(kError, "draft worker %s: Propose failed (%s); its %d sequences decode without "
                 "a draft", address, status.ok() ? "wrong proposal count" : status.error_message(),
                 call.index.size());
      for (size_t i : call.index) {
        out[i].ok = false;
        Unassign(requests[i].seq);
      }
      // A worker that answers with an error is alive: it is only unhealthy
      // when the call itself failed.
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        workers_->MarkUnhealthy(address);
        Forget(address);
      }
      continue;
    }
    for (size_t k = 0; k < call.index.size(); ++k) {
      out[call.index[k]] = protocol::DraftProposalFromProto(response.proposals(static_cast<int>(k)));
    }
  }
  return out;
}

bool GrpcDraftPool::Release(SeqId seq, int32_t keep_length) {
  auto it = assigned_.find(seq);
  if (it == assigned_.end()) return keep_length == 0;
  const Assigned worker = it->second;
  if (keep_length == 0) Unassign(seq);
  auto stub = tandem::v1::Draft::NewStub(worker.channel);
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadlineAfter(timeout_));
  workers_->Authorize(context);
  tandem::v1::ReleaseRequest request;
  tandem::v1::ReleaseSequence* s = request.add_sequences();
  s->set_seq_id(WireId(seq));
  s->set_keep_length(keep_length);
  tandem::v1::ReleaseResponse response;
  grpc::Status status = stub->Release(&context, request, &response);
  if (status.ok()) return true;
  TANDEM_LOG(kError, "draft worker %s: Release of sequence %d to %d failed: %s", worker.address,
             seq.value(), keep_length, status.error_message());
  Unassign(seq);
  return false;
}

}  // namespace tandem::coordinator
