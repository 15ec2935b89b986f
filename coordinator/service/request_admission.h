// RequestAdmission: the one way a generation request enters the cluster,
// whichever front end parsed it — the gRPC Inference service
// (InferenceService) or the OpenAI-compatible HTTP API (coordinator/http).
// It checks the requested draft, routes the request to a worker group
// (WorkerGroupPool's Router), registers the front end's observer for the
// request's results and submits it to that group's SchedulerLoop. It is the
// RequestObserver every scheduler reports to; its RequestRegistry hands each
// result to the request's observer on the registry's own thread. It also
// holds what both front ends read about the served model: the tokenizer
// (prompts, chat template) and the first group's WorkerGroupInfo.
//
// No gRPC or HTTP type appears here: errors are absl::Status, which each
// front end maps to its own codes (DESIGN.md "Errors").
//
// Thread-safety: every method may be called from any thread once set_pool
// was called; OnDelta / OnFinished (scheduler threads) only queue.
#ifndef TANDEM_COORDINATOR_SERVICE_REQUEST_ADMISSION_H_
#define TANDEM_COORDINATOR_SERVICE_REQUEST_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/api/request.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "coordinator/scheduler/worker_group.h"
#include "coordinator/service/admitted_request.h"
#include "coordinator/service/request_registry.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"

namespace tandem::coordinator {

class RequestAdmission final : public RequestObserver {
 public:
  // `tokenizer` and `info` describe the served model; the tokenizer must
  // outlive this object. Call set_pool() before admitting.
  RequestAdmission(const tokenizer::Tokenizer* tokenizer, const WorkerGroupInfo& info);

  // The kind (draft::DraftKindOfName) of the coordinator's in-process draft
  // (--speculative), if any: with the draft workers and n-gram drafting it
  // is what a request's draft may name.
  void set_local_draft_kind(std::string kind) { local_draft_kind_ = std::move(kind); }
  // Parse control-token text inside chat message content as control tokens
  // (transformers' and vLLM's behaviour; --chat-control-tokens-in-content).
  // Call before serving.
  void set_control_tokens_in_content(bool parse) { control_tokens_in_content_ = parse; }
  // The groups requests run on (their schedulers report to this object) and
  // the draft workers (may be null). Both must outlive every admitted
  // request.
  void set_pool(WorkerGroupPool* pool, const DraftWorkerSet* drafts) {
    pool_ = pool;
    drafts_ = drafts;
  }

  // `metrics` (may be null; must outlive the pool's schedulers) also sees
  // every finished request, before its own observer. Call before serving.
  void set_metrics(RequestObserver* metrics) { metrics_ = metrics; }

  // New requests are refused with UNAVAILABLE from now on (SIGTERM);
  // admitted ones run on.
  void StopAdmitting() { admitting_.store(false); }
  bool admitting() const { return admitting_.load(); }
  // True when at least one worker group is healthy and not draining.
  bool AnyGroupServing() const;

  // A fresh request id, unique in this process.
  RequestId NextId() { return RequestId(next_request_id_.fetch_add(1)); }

  // ValidateGenerateRequest against the served model (its vocabulary,
  // context, KV cache and EOS ids): INVALID_ARGUMENT naming the value and the
  // limit. Front ends call it before sizing anything from the request's
  // fields (n, num_return_sequences); Admit calls it again.
  absl::Status Validate(const GenerateRequest& request) const;

  // Admits `request` (its id from NextId, its prompt tokenized): validates it,
  // checks the requested draft, routes, registers `observer` for the request's results
  // and submits. UNAVAILABLE while not admitting or with no serving group;
  // INVALID_ARGUMENT for a bad request, naming the value and the limit;
  // the scheduler's refusal otherwise. On error nothing stays registered.
  absl::StatusOr<AdmittedRequest> Admit(GenerateRequest request, RequestObserver* observer);
  // Stops delivering `id`'s results; once it returns the observer may be
  // destroyed (RequestRegistry::Remove). No-op for an unknown id.
  void Release(RequestId id) {
    registry_.Remove(id);
    pool_->Forget(id);
  }

  // The prompt tokens of `text` (BOS added as the model asks; special
  // tokens written in the text are parsed). INVALID_ARGUMENT, before any
  // tokenizing, when `text` is longer than max_prompt_bytes(): such a text
  // has more tokens than the context holds.
  absl::StatusOr<std::vector<int32_t>> EncodeText(std::string_view text) const;
  // Bytes of prompt text (or rendered chat) admitted for tokenizing: the context length times
  // twice the longest token's bytes (a token covers at most that many
  // bytes of text; the factor 2 leaves room for what the tokenizer's
  // normalization drops).
  int64_t max_prompt_bytes() const { return max_prompt_bytes_; }
  // The prompt tokens of `messages` through the model's chat template.
  // Control-token text inside a message's content (a user writing
  // "<|im_start|>system") is tokenized as plain text, so no message can open
  // a turn of its own, unless set_control_tokens_in_content(true).
  // INVALID_ARGUMENT for no messages, a template that cannot render them or
  // a rendered text over max_prompt_bytes().
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      const std::vector<tokenizer::ChatMessage>& messages, bool add_generation_prompt) const;
  // The text of `ids` (invalid UTF-8 replaced by U+FFFD). INVALID_ARGUMENT
  // naming an id outside the vocabulary.
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const WorkerGroupInfo& info() const { return info_; }
  const WorkerGroupPool& pool() const { return *pool_; }
  const DraftWorkerSet* drafts() const { return drafts_; }

  // RequestObserver (scheduler threads): queued for the request's observer.
  void OnDelta(const CompletionDelta& delta) override { registry_.OnDelta(delta); }
  void OnFinished(const RequestOutput& output) override {
    if (metrics_ != nullptr) metrics_->OnFinished(output);
    registry_.OnFinished(output);
  }

 private:
  // InvalidArgument naming the size and the limit when `text` is longer
  // than max_prompt_bytes().
  absl::Status CheckPromptBytes(std::string_view text) const;
  // InvalidArgument unless `requested` (a request's draft) is empty or a
  // draft kind that runs here, naming the kinds that do.
  absl::Status CheckRequestedDraft(const std::string& requested) const;

  const tokenizer::Tokenizer* tokenizer_;
  const WorkerGroupInfo info_;
  const int64_t max_prompt_bytes_;
  WorkerGroupPool* pool_ = nullptr;
  const DraftWorkerSet* drafts_ = nullptr;
  RequestObserver* metrics_ = nullptr;
  std::string local_draft_kind_;
  bool control_tokens_in_content_ = false;
  std::atomic<bool> admitting_{true};
  std::atomic<int64_t> next_request_id_{1};
  // The observers of the requests in flight, by request id.
  RequestRegistry registry_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_REQUEST_ADMISSION_H_
