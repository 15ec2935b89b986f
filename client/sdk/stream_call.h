// GenerationStream::Call: one GenerateStream RPC, read synchronously, with
// the first event read ahead (Client::OpenStream waits for it so that
// UNAVAILABLE before any event can be retried).
#ifndef TANDEM_CLIENT_SDK_STREAM_CALL_H_
#define TANDEM_CLIENT_SDK_STREAM_CALL_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "client/sdk/retry.h"
#include "grpcpp/grpcpp.h"
#include "tandem/client.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem {

struct GenerationStream::Call {
  // Starts the RPC on `stub` and reads its first message. Afterwards either
  // `ahead` holds the first event, or the stream ended (`done`, `status`).
  Call(v1::Inference::Stub& stub, const v1::GenerateRequest& request,
       const sdk::Deadline& deadline, const std::string& api_key);
  // Cancels a stream that has not ended and waits for its status.
  ~Call();

  // The next event (the read-ahead one first); nullopt at the end.
  std::optional<StreamEvent> Next();
  // Reads the stream's final status once it ended.
  void Finish();

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>> reader;
  std::optional<StreamEvent> ahead;
  bool done = false;
  absl::Status status;
};

}  // namespace tandem

#endif  // TANDEM_CLIENT_SDK_STREAM_CALL_H_
