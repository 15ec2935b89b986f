#include "coordinator/http/openai_api.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "coordinator/http/generation_call.h"
#include "coordinator/http/json_fields.h"
#include "coordinator/http/openai_error.h"
#include "coordinator/http/openai_response.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::coordinator::http {
namespace {

using nlohmann::json;
namespace bhttp = boost::beast::http;

HttpResponse JsonResponse(const json& body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

// The body as a JSON object read by `read`, with its unknown fields refused;
// a 400 response otherwise.
template <typename Read>
std::optional<HttpResponse> ReadBody(const std::string& body, Read read) {
  json object = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) {
    return ErrorResponse(400, "the body must be a JSON object");
  }
  JsonFields f(object);
  read(f);
  if (std::optional<FieldError> e = f.Error()) return ErrorResponse(400, e->message, e->path);
  return std::nullopt;
}

// The request's Authorization header, if any.
std::optional<std::string_view> AuthorizationOf(const HttpRequest& request) {
  auto it = request.find(bhttp::field::authorization);
  if (it == request.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

// The path without its query string.
std::string_view PathOf(const HttpRequest& request) {
  std::string_view target(request.target().data(), request.target().size());
  return target.substr(0, target.find('?'));
}

}  // namespace

OpenAiApi::OpenAiApi(RequestAdmission* admission, ApiOptions options)
    : admission_(admission),
      options_(std::move(options)),
      created_(absl::ToUnixSeconds(absl::Now())) {}

HttpResponse OpenAiApi::ErrorResponse(int status, const std::string& message) {
  return http::ErrorResponse(status, message);
}

void OpenAiApi::Handle(const HttpRequest& request, HttpResponder responder) {
  const std::string_view path = PathOf(request);
  const bool get = request.method() == bhttp::verb::get;
  const bool post = request.method() == bhttp::verb::post;
  const std::string& body = request.body();
  struct Route {
    std::string_view path;
    bool is_post;
  };
  static constexpr Route kRoutes[] = {
      {"/v1/completions", true}, {"/v1/chat/completions", true}, {"/tokenize", true},
      {"/detokenize", true},     {"/v1/models", false},          {"/health", false},
      {"/ready", false},         {"/tokenizer_info", false},     {"/metrics", false}};
  const Route* route = std::find_if(std::begin(kRoutes), std::end(kRoutes),
                                    [&](const Route& r) { return r.path == path; });
  if (route == std::end(kRoutes)) {
    return responder.Respond(
        http::ErrorResponse(404, absl::StrFormat("no such path: %s", std::string(path))));
  }
  if (route->is_post ? !post : !get) {
    HttpResponse r = http::ErrorResponse(
        405, absl::StrFormat("%s %s is not allowed: use %s", std::string(request.method_string()),
                             std::string(path), route->is_post ? "POST" : "GET"));
    r.headers.emplace_back("Allow", route->is_post ? "POST" : "GET");
    return responder.Respond(std::move(r));
  }
  if (std::optional<HttpResponse> denied = Unauthorized(path, request)) {
    return responder.Respond(*std::move(denied));
  }
  if (path == "/v1/completions") return Generate(ApiKind::kCompletion, request, responder);
  if (path == "/v1/chat/completions") return Generate(ApiKind::kChat, request, responder);
  if (path == "/tokenize") return responder.Respond(Tokenize(body));
  if (path == "/detokenize") return responder.Respond(Detokenize(body));
  if (path == "/v1/models") return responder.Respond(Models());
  if (path == "/health") return responder.Respond(Health());
  if (path == "/ready") return responder.Respond(Ready());
  if (path == "/tokenizer_info") return responder.Respond(TokenizerInfo());
  responder.Respond(Metrics());
}

std::optional<HttpResponse> OpenAiApi::Unauthorized(std::string_view path,
                                                    const HttpRequest& request) const {
  const bool open = path == "/health" || path == "/ready" ||
                    (path == "/metrics" && !options_.metrics_need_key);
  if (open) return std::nullopt;
  absl::Status auth = options_.api_key.Check(AuthorizationOf(request));
  if (auth.ok()) return std::nullopt;
  HttpResponse r = http::ErrorResponse(401, std::string(auth.message()));
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> OpenAiApi::PromptTokens(
    const OpenAiRequest& r) const {
  std::vector<std::vector<int32_t>> prompts;
  if (r.kind == ApiKind::kChat) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                     admission_->EncodeChat(r.messages, r.add_generation_prompt));
    prompts.push_back(std::move(ids));
    return prompts;
  }
  if (r.prompts.size() > static_cast<size_t>(kMaxBatchPrompts)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt has %d prompts: at most %d per request", r.prompts.size(), kMaxBatchPrompts));
  }
  for (const PromptInput& p : r.prompts) {
    if (const std::string* text = std::get_if<std::string>(&p)) {
      ASSIGN_OR_RETURN(std::vector<int32_t> ids, admission_->EncodeText(*text));
      prompts.push_back(std::move(ids));
    } else {
      prompts.push_back(std::get<std::vector<int32_t>>(p));
    }
  }
  return prompts;
}

absl::StatusOr<std::vector<GenerateRequest>> OpenAiApi::NativeRequests(const OpenAiRequest& r) {
  GenerateRequest base = r.request;
  if (r.max_tokens_given && base.params.max_tokens == 0) {
    if (!r.echo || r.kind == ApiKind::kChat) {
      return absl::InvalidArgumentError(
          "max_tokens 0 is out of range: must be >= 1 (0 only with echo, for the prompt alone)");
    }
    // A prefill samples one token anyway; the answer drops it.
    base.params.max_tokens = 1;
  }
  if (r.logprobs.has_value()) {
    const int32_t k = *r.logprobs;
    const char* name = r.kind == ApiKind::kChat ? "top_logprobs" : "logprobs";
    if (k < 0 || k > sampling::kMaxLogprobs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s %d is out of range: must be in [0, %d]", name, k, sampling::kMaxLogprobs));
    }
    // The engine returns the chosen token's logprob with its alternatives.
    base.params.logprobs = std::max(k, 1);
    // Echo shows the prompt's tokens with their logprobs too.
    if (r.echo && r.kind == ApiKind::kCompletion) base.params.prompt_logprobs = std::max(k, 1);
  }
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> prompts, PromptTokens(r));
  std::vector<GenerateRequest> requests;
  for (std::vector<int32_t>& prompt : prompts) {
    GenerateRequest native = base;
    native.id = admission_->NextId();
    if (r.kind == ApiKind::kChat && !r.max_tokens_given) {
      // vLLM's chat default: whatever the context leaves.
      native.params.max_tokens = std::max<int32_t>(
          1, admission_->info().context_length - static_cast<int32_t>(prompt.size()));
    }
    native.prompt_tokens = std::move(prompt);
    // Before the call sizes its choices from n / num_return_sequences.
    RETURN_IF_ERROR(admission_->Validate(native));
    requests.push_back(std::move(native));
  }
  return requests;
}

void OpenAiApi::Generate(ApiKind kind, const HttpRequest& request,
                         const HttpResponder& responder) {
  std::variant<OpenAiRequest, FieldError> parsed = ParseOpenAiRequest(kind, request.body());
  if (const FieldError* e = std::get_if<FieldError>(&parsed)) {
    return responder.Respond(http::ErrorResponse(400, e->message, e->path));
  }
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  if (!r.model.empty() && r.model != options_.served_model_name) {
    return responder.Respond(http::ErrorResponse(
        404, absl::StrFormat("the model '%s' does not exist: this server serves '%s'", r.model,
                             options_.served_model_name),
        "model"));
  }
  absl::StatusOr<std::vector<GenerateRequest>> requests = NativeRequests(r);
  if (!requests.ok()) return responder.Respond(ErrorResponseOf(requests.status()));
  CallOptions options;
  options.header.kind = kind;
  options.header.id = absl::StrFormat("%s-%d%012x", kind == ApiKind::kChat ? "chatcmpl" : "cmpl",
                                      requests->front().id.value(), created_);
  options.header.created = absl::ToUnixSeconds(absl::Now());
  options.header.model = options_.served_model_name;
  options.header.logprobs = r.logprobs;
  options.header.tokens_as_ids = r.tokens_as_ids;
  options.stream = r.stream;
  options.include_usage = r.include_usage;
  options.echo = r.echo && kind == ApiKind::kCompletion;
  options.generate = !(r.max_tokens_given && r.request.params.max_tokens == 0);
  options.skip_special_tokens = r.skip_special_tokens;
  options.beam_search = r.request.beam.has_value();
  options.choices_per_prompt =
      options.beam_search ? r.request.beam->num_return_sequences : r.request.params.n;
  auto call = std::make_shared<GenerationCall>(admission_, responder, std::move(options));
  call->Start(*std::move(requests));
}

HttpResponse OpenAiApi::Models() const {
  json model = {{"id", options_.served_model_name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "tandem"},
                {"root", options_.served_model_name},
                {"parent", nullptr},
                {"max_model_len", admission_->info().context_length}};
  return JsonResponse({{"object", "list"}, {"data", json::array({model})}});
}

HttpResponse OpenAiApi::Health() const {
  if (admission_->AnyGroupServing()) return JsonResponse(json::object());
  return http::ErrorResponse(503, "no worker group is healthy");
}

HttpResponse OpenAiApi::Ready() const {
  if (!admission_->admitting()) {
    return http::ErrorResponse(503, "the coordinator is draining and admits no new requests");
  }
  return Health();
}

HttpResponse OpenAiApi::TokenizerInfo() const {
  const tokenizer::Tokenizer& tok = admission_->tokenizer();
  auto piece = [&tok](int32_t id) {
    return id >= 0 && id < tok.vocab_size() ? json(tok.TokenToPiece(id)) : json(nullptr);
  };
  const std::string& chat_template = tok.vocab().chat_template;
  return JsonResponse({{"tokenizer_class", "tandem BPE (GGUF)"},
                       {"model_max_length", admission_->info().context_length},
                       {"vocab_size", tok.vocab_size()},
                       {"bos_token", piece(tok.bos_id())},
                       {"eos_token", piece(tok.eos_id())},
                       {"add_bos_token", tok.vocab().add_bos},
                       {"chat_template", chat_template.empty() ? json(nullptr)
                                                               : json(chat_template)}});
}

HttpResponse OpenAiApi::Tokenize(const std::string& body) const {
  std::string prompt, model;
  std::vector<tokenizer::ChatMessage> messages;
  bool has_prompt = false, add_special = true, add_generation_prompt = true;
  std::optional<HttpResponse> error = ReadBody(body, [&](JsonFields& f) {
    f.String("model", &model);
    has_prompt = f.Get("prompt") != nullptr;
    f.String("prompt", &prompt);
    f.Bool("add_special_tokens", &add_special);
    if (!has_prompt) ReadChatMessages(f, &messages);
    f.Bool("add_generation_prompt", &add_generation_prompt);
  });
  if (error.has_value()) return *std::move(error);
  std::vector<int32_t> tokens;
  if (has_prompt) {
    tokens = admission_->tokenizer().Encode(prompt, add_special, /*parse_special=*/true);
  } else {
    absl::StatusOr<std::vector<int32_t>> ids =
        admission_->EncodeChat(messages, add_generation_prompt);
    if (!ids.ok()) return ErrorResponseOf(ids.status());
    tokens = *std::move(ids);
  }
  return JsonResponse({{"count", tokens.size()},
                       {"max_model_len", admission_->info().context_length},
                       {"tokens", tokens},
                       {"token_strs", nullptr}});
}

HttpResponse OpenAiApi::Detokenize(const std::string& body) const {
  std::vector<int32_t> tokens;
  std::string model;
  std::optional<HttpResponse> error = ReadBody(body, [&](JsonFields& f) {
    f.String("model", &model);
    f.Ints("tokens", &tokens);
  });
  if (error.has_value()) return *std::move(error);
  absl::StatusOr<std::string> text = admission_->Decode(tokens, /*skip_special_tokens=*/false);
  if (!text.ok()) return ErrorResponseOf(text.status());
  return JsonResponse({{"prompt", *text}});
}

HttpResponse OpenAiApi::Metrics() const {
  if (!options_.metrics) return http::ErrorResponse(404, "this server serves no metrics");
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = options_.metrics();
  return r;
}

}  // namespace tandem::coordinator::http
