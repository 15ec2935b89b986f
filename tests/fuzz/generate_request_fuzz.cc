// libFuzzer target for the public request as the coordinator receives it:
// arbitrary bytes are parsed as a tandem.v1.GenerateRequest; when they parse,
// the protocol layer converts it (protocol::GenerateRequestFromProto) and the
// coordinator validates it (coordinator::ValidateGenerateRequest) against the
// limits of a SmolLM2-sized model, as InferenceService::Admit and the
// scheduler do. Errors must carry a message (INVALID_ARGUMENT or, for a
// prompt past the KV cache, RESOURCE_EXHAUSTED); a request that passes must
// be in every documented range. The prompt stands in for the tokenizer's
// output: token ids as sent, a text or chat as one id per byte. Built by
// run_fuzz.sh.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/scheduler/request_validation.h"
#include "engine/sampling/sampling_params.h"
#include "google/protobuf/stubs/logging.h"
#include "protocol/generate_request_codec.h"
#include "tandem/v1/inference.pb.h"

namespace {

namespace pb = tandem::v1;
using tandem::coordinator::GenerateRequest;
using tandem::coordinator::RequestLimits;

// SmolLM2-135M with a small KV cache, so RESOURCE_EXHAUSTED is reachable.
constexpr RequestLimits kLimits = {.vocab_size = 49152,
                                   .context_length = 2048,
                                   .num_blocks = 64,
                                   .block_size = 16,
                                   .num_eos_ids = 2};

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "generate_request_fuzz invariant broken: %s\n", what);
  std::abort();
}

void AppendBytes(std::string_view text, std::vector<int32_t>& ids) {
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
}

// What InferenceService::PromptTokens would produce, with one id per byte
// in place of the tokenizer; false when the prompt is not set.
bool PromptTokens(const pb::GenerateRequest& request, std::vector<int32_t>& ids) {
  switch (request.prompt_case()) {
    case pb::GenerateRequest::kText:
      AppendBytes(request.text(), ids);
      return true;
    case pb::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      return true;
    case pb::GenerateRequest::kChat:
      for (const pb::ChatMessage& m : request.chat().messages()) {
        AppendBytes(m.role(), ids);
        AppendBytes(m.content(), ids);
      }
      return true;
    case pb::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return false;
}

bool Finite(double x) { return std::isfinite(x); }

// A request ValidateGenerateRequest accepted must be in every range its
// header and SamplingParams / BeamSearchParams document.
void CheckAccepted(const GenerateRequest& r) {
  namespace s = tandem::sampling;
  const auto& p = r.params;
  const int64_t prompt_len = static_cast<int64_t>(r.prompt_tokens.size());
  if (prompt_len == 0) Fail("an empty prompt accepted");
  for (int32_t t : r.prompt_tokens) {
    if (t < 0 || t >= kLimits.vocab_size) Fail("a prompt token outside the vocabulary accepted");
  }
  if (p.max_tokens < 1 || prompt_len + p.max_tokens > kLimits.context_length) {
    Fail("max_tokens past the context accepted");
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) Fail("min_tokens out of range accepted");
  if (!Finite(p.temperature) || p.temperature < 0) Fail("a bad temperature accepted");
  if (!Finite(p.top_p) || p.top_p <= 0 || p.top_p > 1) Fail("a bad top_p accepted");
  if (!Finite(p.min_p) || p.min_p < 0 || p.min_p > 1) Fail("a bad min_p accepted");
  if (!Finite(p.repetition_penalty) || p.repetition_penalty <= 0) {
    Fail("a bad repetition_penalty accepted");
  }
  if (!Finite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2) {
    Fail("a bad presence_penalty accepted");
  }
  if (!Finite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2) {
    Fail("a bad frequency_penalty accepted");
  }
  if (p.top_k < -1) Fail("a negative top_k accepted");
  if (p.logprobs < 0 || p.logprobs > s::kMaxLogprobs) Fail("logprobs out of range accepted");
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > s::kMaxLogprobs) {
    Fail("prompt_logprobs out of range accepted");
  }
  if (p.n < 1 || p.n > s::kMaxN) Fail("n out of range accepted");
  for (int32_t t : p.stop_token_ids) {
    if (t < 0 || t >= kLimits.vocab_size) Fail("a stop token outside the vocabulary accepted");
  }
  for (const auto& stop : p.stop) {
    if (stop.empty()) Fail("an empty stop string accepted");
  }
  if (r.beam) {
    const auto& b = *r.beam;
    if (b.num_beams < tandem::coordinator::kMinBeams ||
        b.num_beams > tandem::coordinator::kMaxBeams) {
      Fail("num_beams out of range accepted");
    }
    if (b.num_beam_groups < 1 || b.num_beams % b.num_beam_groups != 0) {
      Fail("num_beam_groups that does not divide num_beams accepted");
    }
    if (b.num_return_sequences < 1 || b.num_return_sequences > b.num_beams) {
      Fail("num_return_sequences out of range accepted");
    }
    if (!Finite(b.length_penalty) || !Finite(b.diversity_penalty) || b.diversity_penalty < 0) {
      Fail("a bad beam penalty accepted");
    }
    if (p.n != 1 || !p.stop.empty()) Fail("beam search with n > 1 or stop strings accepted");
    if (b.do_sample && p.temperature < tandem::sampling::kGreedyTemperature) {
      Fail("beam sampling at temperature 0 accepted");  // the worker's warpers divide by it
    }
  }
  if (r.num_speculative_tokens &&
      (*r.num_speculative_tokens < 0 ||
       *r.num_speculative_tokens > tandem::coordinator::kMaxSpeculativeTokens)) {
    Fail("num_speculative_tokens out of range accepted");
  }
  const int64_t blocks = (prompt_len + 1 + kLimits.block_size - 1) / kLimits.block_size;
  if (blocks > kLimits.num_blocks) Fail("a prompt past the KV cache accepted");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parse failures (invalid UTF-8 in a string field) are expected here;
  // protobuf's log line for each would only slow the fuzzer down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pb::GenerateRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<GenerateRequest> native = tandem::protocol::GenerateRequestFromProto(proto);
  if (!native.ok()) {
    if (native.status().code() != absl::StatusCode::kInvalidArgument ||
        native.status().message().empty()) {
      Fail("a conversion error that is not INVALID_ARGUMENT with a message");
    }
    return 0;
  }
  if (!PromptTokens(proto, native->prompt_tokens)) return 0;  // the service rejects it
  const absl::Status status = tandem::coordinator::ValidateGenerateRequest(*native, kLimits);
  if (!status.ok()) {
    if ((status.code() != absl::StatusCode::kInvalidArgument &&
         status.code() != absl::StatusCode::kResourceExhausted) ||
        status.message().empty()) {
      Fail("a validation error that is not INVALID_ARGUMENT / RESOURCE_EXHAUSTED with a message");
    }
    return 0;
  }
  CheckAccepted(*native);
  return 0;
}
