#include "coordinator/http/openai_request.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace tandem::coordinator::http {
namespace {

using nlohmann::json;

// Parses `body` into `*out`; an error when it is not a JSON object.
std::optional<FieldError> ParseBody(std::string_view body, json* out) {
  try {
    *out = json::parse(body);
  } catch (const json::exception& e) {  // syntax, or a number out of range
    return FieldError{absl::StrFormat("the body is not valid JSON: %s", e.what()), ""};
  }
  if (!out->is_object()) {
    return FieldError{
        absl::StrFormat("the body must be a JSON object, got %s", JsonTypeName(*out)), ""};
  }
  return std::nullopt;
}

void ReadSampling(JsonFields& f, OpenAiRequest& r) {
  sampling::SamplingParams& p = r.request.params;
  f.Float("temperature", &p.temperature);
  f.Float("top_p", &p.top_p);
  f.Int("top_k", &p.top_k);
  f.Float("min_p", &p.min_p);
  f.Float("presence_penalty", &p.presence_penalty);
  f.Float("frequency_penalty", &p.frequency_penalty);
  f.Float("repetition_penalty", &p.repetition_penalty);
  f.Int("n", &p.n);
  f.Seed("seed", &p.seed);
  f.Strings("stop", &p.stop);
  f.Ints("stop_token_ids", &p.stop_token_ids);
  f.Int("min_tokens", &p.min_tokens);
  f.Bool("ignore_eos", &p.ignore_eos);
  f.Bool("skip_special_tokens", &r.skip_special_tokens);
  f.Int("priority", &r.request.priority);
  std::optional<int32_t> max_tokens;
  f.OptionalInt("max_tokens", &max_tokens);
  if (r.kind == ApiKind::kChat && !max_tokens.has_value()) {
    f.OptionalInt("max_completion_tokens", &max_tokens);
  }
  if (max_tokens.has_value()) {
    p.max_tokens = *max_tokens;
    r.max_tokens_given = true;
  }
}

// vLLM's beam search (use_beam_search: n beams, n returned) and tandem's
// transformers-style fields (num_beams, num_return_sequences, groups).
void ReadBeamSearch(JsonFields& f, OpenAiRequest& r) {
  bool use_beam_search = false;
  f.Bool("use_beam_search", &use_beam_search);
  std::optional<int32_t> num_beams, num_return;
  f.OptionalInt("num_beams", &num_beams);
  f.OptionalInt("num_return_sequences", &num_return);
  BeamSearchParams beam;
  f.Double("length_penalty", &beam.length_penalty);
  f.Int("num_beam_groups", &beam.num_beam_groups);
  f.Double("diversity_penalty", &beam.diversity_penalty);
  if (const json* es = f.Get("early_stopping")) {
    if (es->is_boolean()) {
      beam.early_stopping = es->get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
    } else if (es->is_string() && es->get<std::string>() == "never") {
      beam.early_stopping = EarlyStopping::kNever;
    } else {
      f.FailType("early_stopping", "true, false or \"never\"", *es);
    }
  }
  if (!use_beam_search && !num_beams.has_value()) return;
  const int32_t n = r.request.params.n;
  beam.num_beams = num_beams.value_or(n);
  beam.num_return_sequences = num_return.value_or(num_beams.has_value() ? 1 : n);
  r.request.params.n = 1;
  r.request.beam = beam;
}

// Speculation per request: num_speculative_tokens (0: off) and the draft.
void ReadSpeculation(JsonFields& f, OpenAiRequest& r) {
  std::optional<int32_t> tokens;
  f.OptionalInt("num_speculative_tokens", &tokens);
  r.request.num_speculative_tokens = tokens;
  f.String("draft", &r.request.draft);
}

// OpenAI fields tandem does not implement: accepted only at their defaults;
// and the ones it ignores.
void ReadUnsupported(JsonFields& f, const OpenAiRequest& r) {
  for (const char* ignored : {"user", "store", "metadata", "service_tier", "parallel_tool_calls"}) {
    f.Get(ignored);
  }
  if (const json* v = f.Get("best_of"); v != nullptr && *v != json(r.request.params.n)) {
    f.Fail("best_of", "'best_of' is not supported: leave it unset or equal to n");
  }
  for (const char* name : {"logit_bias", "tools", "functions"}) {
    if (const json* v = f.Get(name); v != nullptr && !v->empty()) {
      f.Fail(name, absl::StrFormat("'%s' is not supported: leave it unset or empty", name));
    }
  }
  if (const json* v = f.Get("suffix"); v != nullptr && *v != json("")) {
    f.Fail("suffix", "'suffix' is not supported: leave it unset or empty");
  }
  if (const json* v = f.Get("tool_choice");
      v != nullptr && *v != json("none") && *v != json("auto")) {
    f.Fail("tool_choice", "'tool_choice' is not supported: leave it unset, \"none\" or \"auto\"");
  }
  if (const json* v = f.Get("response_format");
      v != nullptr && *v != json::object({{"type", "text"}})) {
    f.Fail("response_format",
           "'response_format' is not supported: leave it unset or {\"type\": \"text\"}");
  }
  bool include_stop = false;
  f.Bool("include_stop_str_in_output", &include_stop);
  if (include_stop) {
    f.Fail("include_stop_str_in_output", "'include_stop_str_in_output' true is not supported");
  }
}

void ReadStreamOptions(JsonFields& f, OpenAiRequest& r) {
  f.Bool("stream", &r.stream);
  const json* options = f.Get("stream_options");
  if (options == nullptr) return;
  if (!options->is_object()) return f.FailType("stream_options", "an object", *options);
  JsonFields o(*options, "stream_options.");
  o.Bool("include_usage", &r.include_usage);
  bool continuous = true;
  o.Bool("continuous_usage_stats", &continuous);
  if (std::optional<FieldError> e = o.Error()) f.Fail("stream_options", e->message);
}

// `prompt`: a string, a list of strings, token ids or a list of token-id lists.
void ReadPrompt(JsonFields& f, OpenAiRequest& r) {
  const json* v = f.Get("prompt");
  if (v == nullptr) return f.Fail("prompt", "'prompt' is required");
  constexpr char kWhat[] = "a string, a list of strings, a list of token ids or a list of lists";
  if (v->is_string()) {
    r.prompts.emplace_back(v->get<std::string>());
    return;
  }
  if (!v->is_array() || v->empty()) return f.FailType("prompt", kWhat, *v);
  if ((*v)[0].is_number_integer()) {
    std::vector<int32_t> ids;
    f.Ints("prompt", &ids);
    r.prompts.emplace_back(std::move(ids));
    return;
  }
  for (const json& item : *v) {
    if (item.is_string()) {
      r.prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array()) {
      // JsonFields keeps a reference: the object must outlive it.
      const json wrapped = json::object({{"prompt", item}});
      JsonFields one(wrapped);
      std::vector<int32_t> ids;
      one.Ints("prompt", &ids);
      if (std::optional<FieldError> e = one.Error()) return f.Fail("prompt", e->message);
      r.prompts.emplace_back(std::move(ids));
    } else {
      return f.FailType("prompt", kWhat, item);
    }
  }
}

// A message's content: a string or a list of {"type": "text", "text"} parts.
std::optional<std::string> MessageContent(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return std::nullopt;
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

void ReadMessages(JsonFields& f, OpenAiRequest& r) {
  ReadChatMessages(f, &r.messages);
  f.Bool("add_generation_prompt", &r.add_generation_prompt);
}

// Completions: `logprobs` is the number of alternatives. Chat: `logprobs`
// is a boolean and `top_logprobs` the number.
void ReadLogprobs(JsonFields& f, OpenAiRequest& r) {
  if (r.kind == ApiKind::kCompletion) {
    f.OptionalInt("logprobs", &r.logprobs);
    f.Bool("echo", &r.echo);
    return;
  }
  bool logprobs = false;
  f.Bool("logprobs", &logprobs);
  std::optional<int32_t> top;
  f.OptionalInt("top_logprobs", &top);
  if (logprobs) r.logprobs = top.value_or(0);
  f.Bool("echo", &r.echo);
}

void ReadLogprobOptions(JsonFields& f, OpenAiRequest& r) {
  ReadLogprobs(f, r);
  f.Bool("return_tokens_as_token_ids", &r.tokens_as_ids);
}

}  // namespace

void ReadChatMessages(JsonFields& f, std::vector<tokenizer::ChatMessage>* out) {
  const json* v = f.Get("messages");
  if (v == nullptr) return f.Fail("messages", "'messages' is required");
  if (!v->is_array()) return f.FailType("messages", "a list of messages", *v);
  if (v->empty()) return f.Fail("messages", "'messages' must hold at least one message, got []");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string path = absl::StrFormat("messages[%d]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return f.Fail("messages", absl::StrFormat("'%s' must be an object with a string 'role'",
                                                path));
    }
    std::optional<std::string> content =
        m.contains("content") ? MessageContent(m["content"]) : std::nullopt;
    if (!content.has_value()) {
      return f.Fail("messages", absl::StrFormat("'%s.content' must be a string or a list of "
                                                "text parts",
                                                path));
    }
    out->push_back({m["role"].get<std::string>(), *std::move(content)});
  }
}

std::variant<OpenAiRequest, FieldError> ParseOpenAiRequest(ApiKind kind, std::string_view body) {
  json object;
  if (std::optional<FieldError> e = ParseBody(body, &object)) return *std::move(e);
  OpenAiRequest r;
  r.kind = kind;
  // OpenAI's completions default; chat's default is what the context allows
  // (the API fills it in once the prompt is tokenized).
  r.request.params.max_tokens = 16;
  JsonFields f(object);
  f.String("model", &r.model);
  if (kind == ApiKind::kCompletion) {
    ReadPrompt(f, r);
  } else {
    ReadMessages(f, r);
  }
  ReadSampling(f, r);
  ReadBeamSearch(f, r);
  ReadSpeculation(f, r);
  ReadStreamOptions(f, r);
  ReadLogprobOptions(f, r);
  ReadUnsupported(f, r);
  if (std::optional<FieldError> e = f.Error()) return *std::move(e);
  return r;
}

}  // namespace tandem::coordinator::http
