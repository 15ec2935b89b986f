// InferenceService: the public tandem.v1.Inference gRPC API, on gRPC's
// callback API: no thread per call. A Generate or GenerateStream handler
// parses the proto into a native GenerateRequest (tokenizing its prompt) and
// hands it, with the call's reactor (GenerateUnaryReactor,
// GenerateStreamReactor) as its observer, to RequestAdmission, which routes,
// registers and submits it; the reactor answers the client with the results
// the admission's registry delivers to it. Proto types and gRPC status codes
// stop here and in those reactors (DESIGN.md "Boundaries", "Errors"). With
// an API key every RPC first checks the call's "authorization" metadata and
// answers UNAUTHENTICATED without touching the scheduler when it is wrong.
//
// Thread-safety: the RPC handlers run on gRPC's callback threads,
// concurrently, and never block on a request.
#ifndef TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
#define TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/api_key.h"
#include "coordinator/api/request.h"
#include "coordinator/service/request_admission.h"
#include "protocol/generate_response_codec.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem::coordinator {

class InferenceService final : public tandem::v1::Inference::CallbackService {
 public:
  // `admission` must outlive the service; `api_key` (open by default) is
  // what every call must present.
  explicit InferenceService(RequestAdmission* admission, ApiKey api_key = {})
      : admission_(admission), api_key_(std::move(api_key)) {}

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const tandem::v1::GenerateRequest* request,
                                     tandem::v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<tandem::v1::GenerateStreamResponse>* GenerateStream(
      grpc::CallbackServerContext* context, const tandem::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const tandem::v1::TokenizeRequest* request,
                                     tandem::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const tandem::v1::DetokenizeRequest* request,
                                       tandem::v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* context,
                                      const tandem::v1::ModelInfoRequest* request,
                                      tandem::v1::ModelInfoResponse* response) override;

 private:
  // Parses `request` and admits it with `reactor` as its observer.
  // UNAVAILABLE while the coordinator is shutting down; otherwise the
  // parse's or RequestAdmission::Admit's error.
  absl::StatusOr<AdmittedRequest> Admit(const tandem::v1::GenerateRequest& request, RequestId id,
                                        const protocol::OutputFormat& format,
                                        RequestObserver* reactor) const;
  // The native request of a validated `request`, with id `id`.
  absl::StatusOr<GenerateRequest> Parse(const tandem::v1::GenerateRequest& request,
                                        RequestId id) const;
  // The response format of `request`; an empty request_id becomes
  // "tandem-ID" after the request's id (echoed in every response and logged).
  static protocol::OutputFormat FormatOf(const tandem::v1::GenerateRequest& request, RequestId id);
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const tandem::v1::GenerateRequest& request) const;
  // The bodies of the unary RPCs that answer at once.
  grpc::Status TokenizeNow(const tandem::v1::TokenizeRequest& request,
                           tandem::v1::TokenizeResponse* response) const;
  grpc::Status DetokenizeNow(const tandem::v1::DetokenizeRequest& request,
                             tandem::v1::DetokenizeResponse* response) const;
  void ModelInfoNow(tandem::v1::ModelInfoResponse* response) const;
  // The call's key against api_key_: OK or UNAUTHENTICATED.
  absl::Status Authenticate(const grpc::CallbackServerContext& context) const;

  RequestAdmission* const admission_;
  const ApiKey api_key_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
