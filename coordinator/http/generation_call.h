// GenerationCall: one POST /v1/completions or /v1/chat/completions being
// answered: the requests it admitted (one per prompt of a batch), the
// results the scheduler reports for them, and the answer — one JSON response
// once every request finished, or (stream) a server-sent-event stream with at
// most one write in flight, what arrives meanwhile coalesced per request
// (RequestStream) and sent as the next event batch. A choice's index is
// prompt × (completions per prompt) + completion, as OpenAI numbers a batch.
// Beam search streams nothing until its beams are final (vLLM does the same).
//
// A client that goes away cancels every request still running; a request
// that fails (a lost worker group) ends the answer with an error: the
// response's status, or an error event in a stream.
//
// Lifetime: shared; the session's client-gone callback and the writes in
// flight hold it, so it lives until its exchange ended. Its destructor
// releases its requests from the registry (no callback runs after) and
// cancels those still running.
//
// Thread-safety: OnDelta / OnFinished run on the registry's delivery thread,
// write completions and the client-gone callback on the session's strand;
// mutex_ guards the state they share.
#ifndef TANDEM_COORDINATOR_HTTP_GENERATION_CALL_H_
#define TANDEM_COORDINATOR_HTTP_GENERATION_CALL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/http/http_session.h"
#include "coordinator/api/request.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/service/request_admission.h"
#include "coordinator/service/request_stream.h"

namespace tandem::coordinator::http {

// How a call answers, fixed by its request.
struct CallOptions {
  ResponseHeader header;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;            // completions: the prompt's text before each choice's
  // max_tokens 0 with echo: the engine computes one token (a prefill
  // always samples one), which the answer drops.
  bool generate = true;
  bool skip_special_tokens = true;
  int32_t choices_per_prompt = 1;  // n, or the beams returned
  bool beam_search = false;
};

class GenerationCall final : public RequestObserver,
                             public std::enable_shared_from_this<GenerationCall> {
 public:
  // `admission` must outlive the call.
  GenerationCall(RequestAdmission* admission, HttpResponder responder, CallOptions options);
  ~GenerationCall() override;

  // Admits `requests` (one per prompt, in order; ids and prompts set) and
  // starts answering. A refused request cancels those admitted before it
  // and answers the error.
  void Start(std::vector<GenerateRequest> requests);

  // RequestObserver (the registry's delivery thread).
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

 private:
  struct Admitted {
    AdmittedRequest request;
    std::vector<int32_t> prompt_tokens;
    RequestStream stream;
    std::optional<RequestOutput> output;  // once finished
    bool echoed = false;  // stream, echo with logprobs: the prompt's chunks were sent
  };
  // A choice's stream state.
  struct ChoiceState {
    int64_t text_offset = 0;
    bool finished = false;
  };

  Admitted* Find(RequestId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The stream's events for what is pending; sets ended_ once every request
  // finished (or one failed) and the last event is among them.
  std::string TakeEvents() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void AppendDeltaEvents(size_t prompt, const std::vector<CompletionDelta>& deltas,
                         std::string& events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void AppendFinishEvents(size_t prompt, const RequestOutput& output, std::string& events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The events that open the stream: the chat role, the echoed prompt
  // (unless it comes with logprobs: then EchoEvents once they arrived).
  std::string OpeningEvents() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Echo with logprobs: each choice of `prompt` opens with the prompt's text
  // and logprobs, sent with the request's first batch.
  void AppendEchoEvents(size_t prompt, const RequestStream::Batch& batch, std::string& events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The choice's logprobs for an echoed prompt (null unless echo with
  // logprobs); offsets from 0.
  nlohmann::json EchoLogprobs(size_t prompt,
                              std::span<const PositionLogprobs> prompt_logprobs) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool EchoesLogprobs() const { return options_.echo && options_.header.logprobs.has_value(); }
  // Stream: writes what is pending unless a write is in flight.
  void MaybeWrite();
  void OnWriteDone(bool ok);
  // Non-stream: the response once every request finished.
  void MaybeRespond();
  HttpResponse CompleteResponse() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The first failed request's status, or OK.
  absl::Status FirstFailure() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool AllFinished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Cancels every request still running (the client is gone).
  void CancelRunning(std::string_view why);
  std::string PromptText(size_t prompt) const;
  int64_t UsagePromptTokens() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  RequestAdmission* const admission_;
  const HttpResponder responder_;
  const CallOptions options_;

  absl::Mutex mutex_;
  std::vector<Admitted> admitted_ ABSL_GUARDED_BY(mutex_);
  std::vector<ChoiceState> choices_ ABSL_GUARDED_BY(mutex_);
  int64_t completion_tokens_ ABSL_GUARDED_BY(mutex_) = 0;
  bool opened_ ABSL_GUARDED_BY(mutex_) = false;  // stream: the opening events were taken
  bool write_in_flight_ ABSL_GUARDED_BY(mutex_) = false;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;  // the answer's end is decided
};

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_GENERATION_CALL_H_
