// ParseOpenAiRequest: the prompt forms, the fields it maps onto the engine's
// request, and bodies it must refuse with a FieldError (never an exception:
// cases the fuzzer found are kept here).
#include "coordinator/http/openai_request.h"

#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::coordinator::http {
namespace {

OpenAiRequest ParseOk(ApiKind kind, const std::string& body) {
  std::variant<OpenAiRequest, FieldError> r = ParseOpenAiRequest(kind, body);
  if (const FieldError* e = std::get_if<FieldError>(&r)) {
    ADD_FAILURE() << body << ": " << e->message;
    return {};
  }
  return std::get<OpenAiRequest>(r);
}

FieldError ParseError(ApiKind kind, const std::string& body) {
  std::variant<OpenAiRequest, FieldError> r = ParseOpenAiRequest(kind, body);
  if (!std::holds_alternative<FieldError>(r)) {
    ADD_FAILURE() << body << " parsed";
    return {};
  }
  return std::get<FieldError>(r);
}

TEST(OpenAiRequestTest, PromptForms) {
  const OpenAiRequest text = ParseOk(ApiKind::kCompletion, R"({"prompt": "Hi"})");
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(text.prompts[0]), "Hi");
  const OpenAiRequest ids = ParseOk(ApiKind::kCompletion, R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts[0]), (std::vector<int32_t>{1, 2, 3}));
  // lm-evaluation-harness's loglikelihood batches: lists of token-id lists.
  const OpenAiRequest lists =
      ParseOk(ApiKind::kCompletion, R"({"prompt": [[1, 2], [3]], "echo": true})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(lists.prompts[1]), (std::vector<int32_t>{3}));
  EXPECT_TRUE(lists.echo);
  const OpenAiRequest texts = ParseOk(ApiKind::kCompletion, R"({"prompt": ["a", "b"]})");
  EXPECT_EQ(texts.prompts.size(), 2u);
}

TEST(OpenAiRequestTest, MapsSamplingFields) {
  const OpenAiRequest r = ParseOk(ApiKind::kCompletion,
                                  R"({"prompt": "x", "max_tokens": 0, "temperature": 0.5,
                                      "top_k": 3, "seed": 9, "n": 2, "logprobs": 2,
                                      "stop": ["a"], "user": "ignored"})");
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.request.params.max_tokens, 0);
  EXPECT_FLOAT_EQ(r.request.params.temperature, 0.5f);
  EXPECT_EQ(r.request.params.top_k, 3);
  EXPECT_EQ(r.request.params.seed, 9u);
  EXPECT_EQ(r.request.params.n, 2);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.request.params.stop, (std::vector<std::string>{"a"}));
}

TEST(OpenAiRequestTest, RefusesBadBodies) {
  // A number past double's range: nlohmann throws out_of_range, not a
  // parse_error (found by openai_request_fuzz).
  EXPECT_NE(ParseError(ApiKind::kCompletion, "11111111e1111111111111").message.find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(ParseError(ApiKind::kCompletion, "{").message.find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(ParseError(ApiKind::kCompletion, "[1]").message.find("JSON object"),
            std::string::npos);
  const FieldError unknown = ParseError(ApiKind::kCompletion, R"({"prompt": "x", "bogus": 1})");
  EXPECT_EQ(unknown.path, "bogus");
  const FieldError type = ParseError(ApiKind::kCompletion, R"({"prompt": "x", "temperature": "hot"})");
  EXPECT_EQ(type.path, "temperature");
  const FieldError nested = ParseError(ApiKind::kCompletion, R"({"prompt": [[1], ["a"]]})");
  EXPECT_EQ(nested.path, "prompt");
  EXPECT_FALSE(ParseError(ApiKind::kChat, R"({"prompt": "x"})").message.empty());
  // No message to answer (found by openai_request_fuzz).
  const FieldError empty = ParseError(ApiKind::kChat, R"({"messages": [], "logprobs": true})");
  EXPECT_EQ(empty.path, "messages");
  EXPECT_NE(empty.message.find("at least one message"), std::string::npos);
}

}  // namespace
}  // namespace tandem::coordinator::http
