// tandem C++ SDK: a client of tandem-coordinator's gRPC Inference API.
//
//   tandem::Client client("127.0.0.1:50051");
//   tandem::GenerateRequest request;
//   request.prompt = "The capital of France is";
//   request.sampling.max_tokens = 16;
//   absl::StatusOr<tandem::GenerateResult> r = client.Generate(request);
//
// Errors are absl::Status with the server's gRPC code (INVALID_ARGUMENT for a
// bad request — the message names the field, value and limit —,
// RESOURCE_EXHAUSTED, UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED). A call that
// fails with UNAVAILABLE before any token reached the caller is retried with
// exponential backoff (RetryPolicy); once a token was delivered, never.
//
// Thread-safety: a Client may be shared by any number of threads (one gRPC
// channel, calls independent). A GenerationStream belongs to one thread.
#ifndef TANDEM_CLIENT_H_
#define TANDEM_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/generation.h"

namespace tandem {

// Retries of UNAVAILABLE before the first token: after the k-th failure
// (k = 1..max_retries) the client waits min(initial * multiplier^(k-1),
// maximum), then tries again.
struct RetryPolicy {
  int32_t max_retries = 3;
  std::chrono::milliseconds initial{100};
  double multiplier = 2.0;
  std::chrono::milliseconds maximum{2000};
};

struct ClientOptions {
  // Deadline of each call, retries included; 0 (or over a year) → none.
  std::chrono::milliseconds timeout{0};
  RetryPolicy retry;
  // Sent as "authorization: Bearer KEY" with every call when not empty
  // (tandem-coordinator --api-key); grpc.health.v1 needs none. Printable
  // ASCII without spaces: another key fails every call with
  // INVALID_ARGUMENT.
  std::string api_key;
  // TLS, for a coordinator started with --tls-cert / --tls-key: used when
  // `tls` is true or `tls_ca_file` is set; plaintext otherwise (a TLS
  // coordinator then refuses every call, UNAVAILABLE). The server's
  // certificate must chain to the PEM CA certificate(s) in `tls_ca_file`
  // (for a self-signed certificate: the certificate itself), or to the
  // system's roots when it is empty, and name the address' host. A file
  // that cannot be read or holds no PEM certificate fails every call with
  // NOT_FOUND / INVALID_ARGUMENT naming it.
  bool tls = false;
  std::string tls_ca_file;
};

// grpc.health.v1 serving states.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };

// "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN".
const char* ServingStatusName(ServingStatus status);

// An open GenerateStream: events are read one at a time, by Next() or by
// iterating (`for (const StreamEvent& e : stream)`). Destroying it before the
// end cancels the request on the server. Move-only.
class GenerationStream {
 public:
  class Iterator;
  struct Call;  // the gRPC call (client/sdk)

  explicit GenerationStream(std::unique_ptr<Call> call);
  GenerationStream(GenerationStream&&) noexcept;
  GenerationStream& operator=(GenerationStream&&) noexcept;
  ~GenerationStream();

  // The next event; nullopt once the stream ended, after which status() says
  // how (OK, or the error that broke it off).
  std::optional<StreamEvent> Next();
  absl::Status status() const;
  // Asks the server to stop; Next() then returns nullopt soon, status() is
  // CANCELLED.
  void Cancel();

  Iterator begin();
  std::default_sentinel_t end() { return {}; }

 private:
  std::unique_ptr<Call> call_;
};

// Input iterator over a stream's events (single pass).
class GenerationStream::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = StreamEvent;
  using difference_type = std::ptrdiff_t;

  Iterator() = default;
  explicit Iterator(GenerationStream* stream) : stream_(stream) { ++*this; }
  const StreamEvent& operator*() const { return *event_; }
  const StreamEvent* operator->() const { return &*event_; }
  Iterator& operator++() {
    event_ = stream_->Next();
    return *this;
  }
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const { return !event_.has_value(); }

 private:
  GenerationStream* stream_ = nullptr;
  std::optional<StreamEvent> event_;
};

class Client {
 public:
  // A client of the coordinator at `address` ("host:port", or any gRPC
  // target such as "dns:///name:port"). Connects lazily: nothing fails here.
  explicit Client(const std::string& address, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Runs `request` to the end (unary Generate).
  absl::StatusOr<GenerateResult> Generate(const GenerateRequest& request);
  // Generate with `messages` as the prompt (the chat template applies).
  absl::StatusOr<GenerateResult> Chat(std::vector<ChatMessage> messages,
                                      GenerateRequest options = {});
  // Streams `request`, calling `on_event` for each event as it arrives, and
  // returns the assembled result. An error after events were delivered is
  // returned as is (no retry).
  absl::StatusOr<GenerateResult> Stream(const GenerateRequest& request,
                                        const std::function<void(const StreamEvent&)>& on_event);
  // Opens a stream for the caller to iterate. Waits for the first event, so
  // that UNAVAILABLE before it is retried and errors such as
  // INVALID_ARGUMENT are returned here; that wait is bounded only by
  // ClientOptions::timeout.
  absl::StatusOr<GenerationStream> OpenStream(const GenerateRequest& request);

  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text);
  absl::StatusOr<std::vector<int32_t>> TokenizeChat(const ChatPrompt& chat);
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& token_ids,
                                         bool skip_special_tokens = false);
  absl::StatusOr<ModelInfo> GetModelInfo();
  // grpc.health.v1 Check of `service` ("" = the whole server).
  absl::StatusOr<ServingStatus> Health(const std::string& service = "");

  // True when the connection is up now (does not try to connect): tells a
  // lost server from an UNAVAILABLE it answered over a live connection.
  bool IsConnected() const;
  const std::string& address() const { return address_; }

 private:
  struct Channel;  // the gRPC channel and stubs (client/sdk)
  std::string address_;
  ClientOptions options_;
  absl::Status options_status_;  // the options' own problem, returned by every call
  std::unique_ptr<Channel> channel_;
};

}  // namespace tandem

#endif  // TANDEM_CLIENT_H_
