// GenerationStream (include/tandem/client.h) and its gRPC call.
#include "client/sdk/generation_codec.h"
#include "client/sdk/stream_call.h"

namespace tandem {

GenerationStream::Call::Call(v1::Inference::Stub& stub, const v1::GenerateRequest& request,
                             const sdk::Deadline& deadline, const std::string& api_key) {
  if (deadline) context.set_deadline(*deadline);
  sdk::Authorize(api_key, context);
  reader = stub.GenerateStream(&context, request);
  ahead = Next();
}

GenerationStream::Call::~Call() {
  if (!done) {
    context.TryCancel();
    // Drain what is in flight so Finish() does not wait on unread messages.
    v1::GenerateStreamResponse msg;
    while (reader->Read(&msg)) {
    }
    Finish();
  }
}

void GenerationStream::Call::Finish() {
  if (done) return;
  done = true;
  status = sdk::FromGrpc(reader->Finish());
}

std::optional<StreamEvent> GenerationStream::Call::Next() {
  if (ahead) {
    std::optional<StreamEvent> event = std::move(ahead);
    ahead.reset();
    return event;
  }
  if (done) return std::nullopt;
  v1::GenerateStreamResponse msg;
  if (reader->Read(&msg)) return sdk::StreamEventFromProto(msg);
  Finish();
  return std::nullopt;
}

GenerationStream::GenerationStream(std::unique_ptr<Call> call) : call_(std::move(call)) {}
GenerationStream::GenerationStream(GenerationStream&&) noexcept = default;
GenerationStream& GenerationStream::operator=(GenerationStream&&) noexcept = default;
GenerationStream::~GenerationStream() = default;

std::optional<StreamEvent> GenerationStream::Next() {
  if (call_ == nullptr) return std::nullopt;
  return call_->Next();
}

absl::Status GenerationStream::status() const {
  if (call_ == nullptr) return absl::FailedPreconditionError("the stream was moved from");
  if (!call_->done) return absl::FailedPreconditionError("the stream has not ended yet");
  return call_->status;
}

void GenerationStream::Cancel() {
  if (call_ != nullptr && !call_->done) call_->context.TryCancel();
}

GenerationStream::Iterator GenerationStream::begin() { return Iterator(this); }

}  // namespace tandem
