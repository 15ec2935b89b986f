#include "coordinator/service/request_admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/scheduler/request_validation.h"
#include "draft/api/speculative_spec.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {

namespace {

int64_t MaxPromptBytes(const tokenizer::Tokenizer& tokenizer, int32_t context_length) {
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    longest = std::max(longest, tokenizer.TokenToPiece(id).size());
  }
  return int64_t{context_length} * 2 * static_cast<int64_t>(longest);
}

}  // namespace

RequestAdmission::RequestAdmission(const tokenizer::Tokenizer* tokenizer,
                                   const WorkerGroupInfo& info)
    : tokenizer_(tokenizer),
      info_(info),
      max_prompt_bytes_(MaxPromptBytes(*tokenizer, info.context_length)) {}

bool RequestAdmission::AnyGroupServing() const {
  for (const WorkerGroupStatusSnapshot& g : pool_->Statuses()) {
    if (g.healthy && !g.draining) return true;
  }
  return false;
}

absl::Status RequestAdmission::CheckPromptBytes(std::string_view text) const {
  if (static_cast<int64_t>(text.size()) <= max_prompt_bytes_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "prompt text has %d bytes: at most %d are tokenized (more cannot fit the context of %d "
      "tokens)",
      text.size(), max_prompt_bytes_, info_.context_length));
}

absl::StatusOr<std::vector<int32_t>> RequestAdmission::EncodeText(std::string_view text) const {
  RETURN_IF_ERROR(CheckPromptBytes(text));
  return tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

absl::StatusOr<std::vector<int32_t>> RequestAdmission::EncodeChat(
    const std::vector<tokenizer::ChatMessage>& messages, bool add_generation_prompt) const {
  if (messages.empty()) {
    return absl::InvalidArgumentError("chat has 0 messages: at least 1 is required");
  }
  std::vector<tokenizer::Tokenizer::ByteRange> content;
  ASSIGN_OR_RETURN(std::string text,
                   tokenizer::ApplyChatTemplate(messages, add_generation_prompt,
                                                tokenizer_->vocab().chat_template, &content));
  RETURN_IF_ERROR(CheckPromptBytes(text));
  if (control_tokens_in_content_) content.clear();
  return tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true, content);
}

absl::StatusOr<std::string> RequestAdmission::Decode(std::span<const int32_t> ids,
                                                     bool skip_special_tokens) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token id %d is out of range: the vocabulary has %d tokens", id,
          tokenizer_->vocab_size()));
    }
  }
  return tokenizer::DecodeValidUtf8(*tokenizer_, ids, skip_special_tokens);
}

absl::Status RequestAdmission::CheckRequestedDraft(const std::string& requested) const {
  if (requested.empty()) return absl::OkStatus();
  if (absl::Status s = draft::ValidateRequestedDraft(requested); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("speculative.", s.message()));
  }
  // n-gram drafting runs in the coordinator for any request.
  std::vector<std::string> kinds = {"ngram"};
  if (!local_draft_kind_.empty()) kinds.push_back(local_draft_kind_);
  if (drafts_ != nullptr) {
    for (const DraftWorkerStatusSnapshot& d : drafts_->Statuses()) {
      if (d.healthy) kinds.push_back(draft::DraftKindOfName(d.model_name));
    }
  }
  for (const std::string& kind : kinds) {
    if (draft::DraftKindMatches(requested, kind)) return absl::OkStatus();
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return absl::InvalidArgumentError(absl::StrFormat(
      "speculative.draft '%s': no draft of that kind runs here (available: %s)", requested,
      absl::StrJoin(kinds, ", ")));
}

absl::Status RequestAdmission::Validate(const GenerateRequest& request) const {
  const RequestLimits limits{info_.vocab_size, info_.context_length, info_.num_blocks,
                             info_.block_size,
                             static_cast<int32_t>(tokenizer_->EndOfGenerationIds().size())};
  return ValidateGenerateRequest(request, limits);
}

absl::StatusOr<AdmittedRequest> RequestAdmission::Admit(GenerateRequest request,
                                                        RequestObserver* observer) {
  if (!admitting_.load()) {
    return absl::UnavailableError("the coordinator is shutting down and admits no new requests");
  }
  RETURN_IF_ERROR(Validate(request));
  RETURN_IF_ERROR(CheckRequestedDraft(request.draft));
  AdmittedRequest admitted;
  admitted.id = request.id;
  admitted.pool = pool_;
  ASSIGN_OR_RETURN(admitted.group, pool_->Route(request.prompt_tokens));
  // Registered first: the scheduler may report results before Submit returns.
  registry_.Add(admitted.id, observer);
  if (absl::Status s = pool_->Submit(admitted.group, std::move(request)); !s.ok()) {
    registry_.Remove(admitted.id);
    return s;
  }
  TANDEM_LOG(kVerbose, "request %d submitted to group %s", admitted.id.value(),
             admitted.group->name);
  return admitted;
}

}  // namespace tandem::coordinator
