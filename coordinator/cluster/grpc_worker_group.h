// GrpcWorkerGroup: the WorkerGroup of a remote target worker group, reached
// over tandem.v1.TargetWorker (rank 0 of the group serves it). Each Step
// encodes the plan as a diff (StepEncoder), calls Step with a deadline that
// scales with the step's tokens (StepPace) and decodes the sampled tokens
// (worker::StepResultFromProto).
//
// Failure contract. Any failed Step RPC (the worker lost, a deadline, a
// rejected request) leaves the encoder and the worker disagreeing about which
// sequences and block tables are live. The scheduler fails the requests of
// the failed step but keeps its other running sequences, which a reset worker
// would no longer know. So the group turns *broken*: the failed Step and
// every later one return UNAVAILABLE (naming the address and the original
// gRPC status) until Reconnect() succeeds; by then the scheduler has failed
// every request that ran here, and the worker starts from a clean Reset.
//
// Thread-safety: Step and Reconnect must be serialized by the caller (the
// scheduler thread); info() is immutable after Connect; suspect() may be
// called from any thread.
#ifndef TANDEM_COORDINATOR_CLUSTER_GRPC_WORKER_GROUP_H_
#define TANDEM_COORDINATOR_CLUSTER_GRPC_WORKER_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/cluster/step_pace.h"
#include "protocol/step_encoder.h"
#include "coordinator/scheduler/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::coordinator {

struct GrpcWorkerGroupOptions {
  // Deadlines of Step RPCs, scaled by each step's tokens at the group's
  // measured pace (a long prefill on CPU can take tens of seconds), and
  // when a late step makes the group suspect (StepPace).
  StepPaceConfig pace;
  // Deadline of Info, Reset and Health.
  absl::Duration control_timeout = absl::Seconds(10);
  // Sent on every call when set (a worker started with --api-key).
  std::optional<std::string> api_key;
  // Not empty: connect over TLS trusting these PEM certificates (a worker
  // started with --tls-cert; the coordinator's --internal-tls-ca).
  std::string tls_ca_pem;
};

class GrpcWorkerGroup : public WorkerGroup {
 public:
  // Opens a channel to `address` ("host:port"), waits up to `timeout` for it
  // to connect, reads the group's geometry with Info and Resets it so it
  // holds no sequences. UNAVAILABLE naming the address when it cannot be
  // reached in time or an RPC fails; INVALID_ARGUMENT when Info reports a
  // non-positive size.
  static absl::StatusOr<std::unique_ptr<GrpcWorkerGroup>> Connect(
      const std::string& address, absl::Duration timeout,
      const GrpcWorkerGroupOptions& options = {});

  const WorkerGroupInfo& info() const override { return info_; }
  // Token ids the group treats as end of sequence (from Info).
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  const std::string& address() const { return address_; }
  // True after a failed Step until Reconnect succeeds.
  bool broken() const { return broken_; }
  // True while a Step is in flight well past its expected time (StepPace):
  // the worker may be hung. Any thread.
  bool suspect() const { return pace_.Suspect(absl::Now()); }

  // Runs one step remotely. INVALID_ARGUMENT when the encoder rejects the
  // plan (nothing was sent; the group stays usable). UNAVAILABLE, naming the
  // address and the gRPC status, when the RPC fails (the group turns broken)
  // or the group is already broken. INTERNAL when the response is malformed
  // (the group turns broken as well).
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override;

  // Waits up to `timeout` for the channel, checks that Info still reports
  // the same model and cache geometry (FAILED_PRECONDITION otherwise: a
  // different worker answers at this address), Resets the worker and the
  // encoder, and clears `broken`. UNAVAILABLE when the worker is unreachable.
  absl::Status Reconnect(absl::Duration timeout);

 private:
  GrpcWorkerGroup(std::string address, const GrpcWorkerGroupOptions& options,
                  std::shared_ptr<grpc::Channel> channel);

  // Waits for the channel, then calls Info into `info` / `eos`.
  absl::Status FetchInfo(absl::Duration timeout, WorkerGroupInfo* info,
                         std::vector<int32_t>* eos);
  absl::Status CallReset();
  // UNAVAILABLE naming the address, the RPC and the gRPC status.
  absl::Status RpcError(const char* rpc, const grpc::Status& status) const;

  const std::string address_;
  const GrpcWorkerGroupOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tandem::v1::TargetWorker::Stub> stub_;
  WorkerGroupInfo info_;
  std::vector<int32_t> eos_token_ids_;
  protocol::StepEncoder encoder_;
  StepPace pace_;
  bool broken_ = false;
  std::string broken_reason_;  // the error that broke the group
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_GRPC_WORKER_GROUP_H_
