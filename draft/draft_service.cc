#include "draft/draft_service.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/grpc/grpc_api_key.h"
#include "common/grpc/grpc_status.h"
#include "protocol/draft_codec.h"

namespace tandem::draft {
DraftService::DraftService(std::unique_ptr<Proposer> proposer)
    : proposer_(std::move(proposer)), info_(proposer_->info()) {}

grpc::Status DraftService::Info(grpc::ServerContext* context,
                                const tandem::v1::DraftInfoRequest* request,
                                tandem::v1::DraftInfoResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  response->set_model_name(info_.name);
  response->set_vocab_size(info_.vocab_size);
  response->set_context_length(info_.context_length);
  response->set_max_sequences(info_.max_sequences);
  return grpc::Status::OK;
}

grpc::Status DraftService::Propose(grpc::ServerContext* context,
                                   const tandem::v1::ProposeRequest* request,
                                   tandem::v1::ProposeResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  grpc::Status status = ProposeUncounted(*request, response);
  if (metrics_ != nullptr) {
    const tandem::v1::StepTimings& t = response->timings();
    metrics_->OnCallDone(status.ok(),
                         {t.total_ms(), t.forward_ms(), t.sample_ms(), t.num_tokens()});
    absl::MutexLock lock(&mutex_);
    metrics_->SetSequences(proposer_->num_sequences());
  }
  return status;
}

grpc::Status DraftService::ProposeUncounted(const tandem::v1::ProposeRequest& req,
                                            tandem::v1::ProposeResponse* response) {
  const tandem::v1::ProposeRequest* request = &req;
  if (!serving_.load()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "draft worker is draining (shutting down); send no more proposals");
  }
  const auto start = std::chrono::steady_clock::now();
  const int n = request->sequences_size();
  std::vector<std::optional<sampling::SamplingParams>> params(static_cast<size_t>(n));
  std::vector<ProposeInput> inputs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    inputs[static_cast<size_t>(i)] = protocol::ProposeInputFromProto(request->sequences(i), params[i]);
  }
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::vector<std::vector<DraftToken>>> out = proposer_->ProposeBatch(inputs);
  if (!out.ok()) return ToGrpcStatus(out.status());
  for (int i = 0; i < n; ++i) {
    tandem::v1::Proposal* proposal = response->add_proposals();
    proposal->set_seq_id(request->sequences(i).seq_id());
    protocol::DraftTokensToProto((*out)[static_cast<size_t>(i)], proposal);
  }
  const ProposeStats& stats = proposer_->last_stats();
  tandem::v1::StepTimings* timings = response->mutable_timings();
  timings->set_forward_ms(stats.forward_ms);
  timings->set_sample_ms(stats.sample_ms);
  timings->set_num_tokens(stats.num_tokens);
  timings->set_total_ms(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return grpc::Status::OK;
}

grpc::Status DraftService::Release(grpc::ServerContext* context,
                                   const tandem::v1::ReleaseRequest* request,
                                   tandem::v1::ReleaseResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  absl::MutexLock lock(&mutex_);
  for (const tandem::v1::ReleaseSequence& s : request->sequences()) {
    const int32_t length = proposer_->Length(SeqId(s.seq_id()));
    if (s.keep_length() < 0 || s.keep_length() > length) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrFormat("sequence %d: keep_length %d is out of range: must be in [0, %d] (the "
                          "tokens the draft holds); nothing was released",
                          s.seq_id(), s.keep_length(), length));
    }
  }
  for (const tandem::v1::ReleaseSequence& s : request->sequences()) {
    absl::Status released = proposer_->Release(SeqId(s.seq_id()), s.keep_length());
    if (!released.ok()) return ToGrpcStatus(released);
  }
  return grpc::Status::OK;
}

}  // namespace tandem::draft
