#include "coordinator/http/generation_call.h"

#include <utility>

#include "coordinator/http/openai_error.h"

namespace tandem::coordinator::http {

using nlohmann::json;

GenerationCall::GenerationCall(RequestAdmission* admission, HttpResponder responder,
                               CallOptions options)
    : admission_(admission), responder_(std::move(responder)), options_(std::move(options)) {}

GenerationCall::~GenerationCall() {
  // No lock: nothing else holds the call now, except a registry callback in
  // flight, which Release waits for (and which must take mutex_).
  for (const Admitted& a : admitted_) {
    if (a.request.group != nullptr) admission_->Release(a.request.id);
  }
  for (const Admitted& a : admitted_) {
    if (a.request.group != nullptr && !a.output.has_value()) {
      a.request.Cancel("its HTTP exchange ended before it finished");
    }
  }
}

void GenerationCall::Start(std::vector<GenerateRequest> requests) {
  {
    absl::MutexLock lock(&mutex_);
    for (const GenerateRequest& r : requests) {
      Admitted a;
      a.request.id = r.id;
      a.prompt_tokens = r.prompt_tokens;
      admitted_.push_back(std::move(a));
    }
    choices_.resize(requests.size() * options_.choices_per_prompt);
    if (options_.echo) {
      for (size_t c = 0; c < choices_.size(); ++c) {
        choices_[c].text_offset =
            static_cast<int64_t>(PromptText(c / options_.choices_per_prompt).size());
      }
    }
  }
  responder_.OnClientGone(
      [self = shared_from_this()] { self->CancelRunning("the HTTP client disconnected"); });
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<AdmittedRequest> a = admission_->Admit(std::move(requests[i]), this);
    if (!a.ok()) {
      {
        absl::MutexLock lock(&mutex_);
        ended_ = true;
      }
      CancelRunning("another prompt of its batch was refused");
      responder_.Respond(ErrorResponseOf(a.status()));
      return;
    }
    absl::MutexLock lock(&mutex_);
    admitted_[i].request = *std::move(a);
  }
  if (options_.stream) MaybeWrite();
}

GenerationCall::Admitted* GenerationCall::Find(RequestId id) {
  for (Admitted& a : admitted_) {
    if (a.request.id == id) return &a;
  }
  return nullptr;
}

void GenerationCall::OnDelta(const CompletionDelta& delta) {
  {
    absl::MutexLock lock(&mutex_);
    Admitted* a = Find(delta.id);
    if (ended_ || a == nullptr || !options_.stream) return;
    a->stream.PushDelta(delta);
  }
  MaybeWrite();
}

void GenerationCall::OnFinished(const RequestOutput& output) {
  {
    absl::MutexLock lock(&mutex_);
    Admitted* a = Find(output.id);
    if (ended_ || a == nullptr) return;
    a->output = output;
    if (options_.stream) a->stream.PushFinished(output);
  }
  if (options_.stream) {
    MaybeWrite();
  } else {
    MaybeRespond();
  }
}

bool GenerationCall::AllFinished() const {
  for (const Admitted& a : admitted_) {
    if (!a.output.has_value()) return false;
  }
  return true;
}

absl::Status GenerationCall::FirstFailure() const {
  for (const Admitted& a : admitted_) {
    if (a.output.has_value() && !a.output->status.ok()) return a.output->status;
  }
  return absl::OkStatus();
}

void GenerationCall::CancelRunning(std::string_view why) {
  std::vector<AdmittedRequest> running;
  {
    absl::MutexLock lock(&mutex_);
    ended_ = true;
    for (const Admitted& a : admitted_) {
      if (a.request.group != nullptr && !a.output.has_value()) running.push_back(a.request);
    }
  }
  for (const AdmittedRequest& r : running) r.Cancel(why);
}

std::string GenerationCall::PromptText(size_t prompt) const {
  absl::StatusOr<std::string> text =
      admission_->Decode(admitted_[prompt].prompt_tokens, /*skip_special_tokens=*/true);
  return text.ok() ? *std::move(text) : std::string();
}

int64_t GenerationCall::UsagePromptTokens() const {
  int64_t n = 0;
  for (const Admitted& a : admitted_) n += static_cast<int64_t>(a.prompt_tokens.size());
  return n;
}

void GenerationCall::MaybeRespond() {
  HttpResponse response;
  bool cancel_rest = false;
  {
    absl::MutexLock lock(&mutex_);
    if (ended_) return;
    if (absl::Status failure = FirstFailure(); !failure.ok()) {
      response = ErrorResponseOf(failure);
      cancel_rest = true;
    } else if (AllFinished()) {
      response = CompleteResponse();
    } else {
      return;
    }
    ended_ = true;
  }
  if (cancel_rest) CancelRunning("another prompt of its batch failed");
  responder_.Respond(std::move(response));
}

HttpResponse GenerationCall::CompleteResponse() {
  json choices = json::array();
  int64_t completion_tokens = 0;
  const tokenizer::Tokenizer& tok = admission_->tokenizer();
  for (size_t p = 0; p < admitted_.size(); ++p) {
    const std::string prefix = options_.echo ? PromptText(p) : std::string();
    const RequestOutput& output = *admitted_[p].output;
    const json echo_logprobs = EchoLogprobs(p, output.prompt_logprobs);
    for (size_t i = 0; i < output.completions.size(); ++i) {
      const Completion& c = output.completions[i];
      int64_t offset = static_cast<int64_t>(prefix.size());
      const int32_t index = static_cast<int32_t>(p) * options_.choices_per_prompt +
                            static_cast<int32_t>(i);
      json logprobs = echo_logprobs;
      if (options_.generate) {
        AppendLogprobs(logprobs, LogprobsJson(options_.header, tok, c.logprobs, &offset));
        completion_tokens += static_cast<int64_t>(c.token_ids.size());
      }
      choices.push_back(ChoiceJson(options_.header, index,
                                   options_.generate ? prefix + c.text : prefix,
                                   std::move(logprobs), c.finish_reason));
    }
  }
  json body = ResponseObject(options_.header, /*chunk=*/false, std::move(choices));
  body["usage"] = UsageJson(UsagePromptTokens(), completion_tokens);
  HttpResponse r;
  r.body = DumpJson(body);
  return r;
}

json GenerationCall::EchoLogprobs(size_t prompt,
                                  std::span<const PositionLogprobs> prompt_logprobs) const {
  if (!EchoesLogprobs()) return nullptr;
  int64_t offset = 0;
  return EchoLogprobsJson(options_.header, admission_->tokenizer(),
                          admitted_[prompt].prompt_tokens, prompt_logprobs, &offset);
}

void GenerationCall::AppendEchoEvents(size_t prompt, const RequestStream::Batch& batch,
                                      std::string& events) {
  Admitted& a = admitted_[prompt];
  if (a.echoed || (batch.deltas.empty() && !batch.finished.has_value())) return;
  a.echoed = true;
  // The request's first delta carries its prompt logprobs.
  std::span<const PositionLogprobs> scored;
  for (const CompletionDelta& d : batch.deltas) {
    if (!d.prompt_logprobs.empty()) scored = d.prompt_logprobs;
  }
  if (scored.empty() && batch.finished.has_value()) scored = batch.finished->prompt_logprobs;
  const std::string text = PromptText(prompt);
  const json logprobs = EchoLogprobs(prompt, scored);
  for (int32_t i = 0; i < options_.choices_per_prompt; ++i) {
    const int32_t c = static_cast<int32_t>(prompt) * options_.choices_per_prompt + i;
    json choice = ChunkChoiceJson(options_.header, c, text, /*role=*/false, logprobs,
                                  FinishReason::kNone);
    events += SseEvent(ResponseObject(options_.header, /*chunk=*/true, json::array({choice})));
  }
}

std::string GenerationCall::OpeningEvents() {
  std::string events;
  const bool chat = options_.header.kind == ApiKind::kChat;
  if (!chat && (!options_.echo || EchoesLogprobs())) return events;
  json choices = json::array();
  for (size_t c = 0; c < choices_.size(); ++c) {
    const std::string text =
        chat ? std::string() : PromptText(c / options_.choices_per_prompt);
    choices.push_back(ChunkChoiceJson(options_.header, static_cast<int32_t>(c), text,
                                      /*role=*/chat, nullptr, FinishReason::kNone));
  }
  for (json& choice : choices) {
    events += SseEvent(ResponseObject(options_.header, /*chunk=*/true, json::array({choice})));
  }
  return events;
}

void GenerationCall::AppendDeltaEvents(size_t prompt, const std::vector<CompletionDelta>& deltas,
                                       std::string& events) {
  // Beams change until final; a max_tokens 0 echo generates nothing.
  if (options_.beam_search || !options_.generate) return;
  const tokenizer::Tokenizer& tok = admission_->tokenizer();
  for (const CompletionDelta& d : deltas) {
    const size_t c = prompt * options_.choices_per_prompt + d.index;
    if (c >= choices_.size() || (d.text.empty() && d.token_ids.empty())) continue;
    json logprobs = LogprobsJson(options_.header, tok, d.logprobs, &choices_[c].text_offset);
    json choice = ChunkChoiceJson(options_.header, static_cast<int32_t>(c), d.text,
                                  /*role=*/false, std::move(logprobs), FinishReason::kNone);
    events += SseEvent(ResponseObject(options_.header, /*chunk=*/true, json::array({choice})));
  }
}

void GenerationCall::AppendFinishEvents(size_t prompt, const RequestOutput& output,
                                        std::string& events) {
  const tokenizer::Tokenizer& tok = admission_->tokenizer();
  for (size_t i = 0; i < output.completions.size(); ++i) {
    const Completion& done = output.completions[i];
    const size_t c = prompt * options_.choices_per_prompt + i;
    if (c >= choices_.size() || choices_[c].finished) continue;
    choices_[c].finished = true;
    if (options_.generate) completion_tokens_ += static_cast<int64_t>(done.token_ids.size());
    // Beam search sends its final beams whole; sampling has streamed them.
    const std::string text = options_.beam_search ? done.text : std::string();
    json logprobs = options_.beam_search
                        ? LogprobsJson(options_.header, tok, done.logprobs,
                                       &choices_[c].text_offset)
                        : json(nullptr);
    json choice = ChunkChoiceJson(options_.header, static_cast<int32_t>(c), text, false,
                                  std::move(logprobs), done.finish_reason);
    events += SseEvent(ResponseObject(options_.header, /*chunk=*/true, json::array({choice})));
  }
}

std::string GenerationCall::TakeEvents() {
  std::string events;
  if (!opened_) {
    opened_ = true;
    events += OpeningEvents();
  }
  for (size_t p = 0; p < admitted_.size(); ++p) {
    RequestStream::Batch batch = admitted_[p].stream.Take();
    if (EchoesLogprobs()) AppendEchoEvents(p, batch, events);
    AppendDeltaEvents(p, batch.deltas, events);
    if (batch.finished.has_value() && batch.finished->status.ok()) {
      AppendFinishEvents(p, *batch.finished, events);
    }
  }
  if (absl::Status failure = FirstFailure(); !failure.ok()) {
    events += SseEvent(ErrorJson(HttpStatusOf(failure.code()), std::string(failure.message())));
    events += kSseDone;
    ended_ = true;
  } else if (AllFinished()) {
    if (options_.include_usage) {
      json usage = ResponseObject(options_.header, /*chunk=*/true, json::array());
      usage["usage"] = UsageJson(UsagePromptTokens(), completion_tokens_);
      events += SseEvent(usage);
    }
    events += kSseDone;
    ended_ = true;
  }
  return events;
}

void GenerationCall::MaybeWrite() {
  std::shared_ptr<GenerationCall> self = weak_from_this().lock();
  if (self == nullptr) return;  // being destroyed: the exchange is over
  std::string events;
  bool end = false;
  bool cancel_rest = false;
  {
    absl::MutexLock lock(&mutex_);
    if (write_in_flight_ || ended_) return;
    events = TakeEvents();
    if (events.empty()) return;
    write_in_flight_ = true;
    end = ended_;
    cancel_rest = end && !FirstFailure().ok();
  }
  if (cancel_rest) CancelRunning("another prompt of its batch failed");
  responder_.Write(std::move(events), [self](bool ok) { self->OnWriteDone(ok); });
  if (end) responder_.EndStream();
}

void GenerationCall::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mutex_);
    write_in_flight_ = false;
  }
  // A failed write closed the connection; the client-gone callback cancels.
  if (ok) MaybeWrite();
}

}  // namespace tandem::coordinator::http
