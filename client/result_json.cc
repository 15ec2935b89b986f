#include "client/result_json.h"

#include <cstdio>
#include <vector>

namespace tandem::client {

using nlohmann::json;

namespace {

// [{"token_id", "logprob"}...] of one position's alternatives.
json AlternativesJson(const coordinator::PositionLogprobs& p) {
  json alts = json::array();
  for (const sampling::TokenLogprob& t : p.top) {
    alts.push_back({{"token_id", t.token}, {"logprob", t.logprob}});
  }
  return alts;
}

json PromptLogprobsJson(std::span<const coordinator::PositionLogprobs> prompt_logprobs) {
  json positions = json::array({nullptr});
  for (const coordinator::PositionLogprobs& p : prompt_logprobs) {
    positions.push_back(
        {{"token_id", p.token}, {"logprob", p.logprob}, {"top_logprobs", AlternativesJson(p)}});
  }
  return positions;
}

}  // namespace

json CompletionJson(std::span<const int32_t> prompt_token_ids,
                    const coordinator::Completion& c, int32_t top_logprobs,
                    int64_t prefix_hit_tokens,
                    std::span<const coordinator::PositionLogprobs> prompt_logprobs) {
  json j;
  j["prompt_token_ids"] = std::vector<int32_t>(prompt_token_ids.begin(), prompt_token_ids.end());
  if (!prompt_logprobs.empty()) j["prompt_logprobs"] = PromptLogprobsJson(prompt_logprobs);
  j["token_ids"] = c.token_ids;
  j["text"] = c.text;
  j["finish_reason"] = coordinator::FinishReasonName(c.finish_reason);
  if (c.score.has_value()) j["score"] = *c.score;
  if (top_logprobs > 0) {
    json positions = json::array();
    json chosen = json::array();
    for (const coordinator::PositionLogprobs& p : c.logprobs) {
      positions.push_back(AlternativesJson(p));
      chosen.push_back(p.logprob);
    }
    j["top_logprobs"] = positions;
    j["logprobs"] = chosen;
  }
  if (prefix_hit_tokens > 0) j["prefix_hit_tokens"] = prefix_hit_tokens;
  return j;
}

json RequestLineJson(std::span<const int32_t> prompt_token_ids,
                     std::span<const coordinator::Completion> completions, int32_t top_logprobs,
                     int64_t prefix_hit_tokens, const std::string& error,
                     std::span<const coordinator::PositionLogprobs> prompt_logprobs) {
  json line;
  // Beam search results (scored) always come as a list, best first.
  const bool scored = !completions.empty() && completions[0].score.has_value();
  if (completions.size() == 1 && !scored) {
    line = CompletionJson(prompt_token_ids, completions[0], top_logprobs, prefix_hit_tokens,
                          prompt_logprobs);
  } else {
    line["prompt_token_ids"] =
        std::vector<int32_t>(prompt_token_ids.begin(), prompt_token_ids.end());
    if (!prompt_logprobs.empty()) line["prompt_logprobs"] = PromptLogprobsJson(prompt_logprobs);
    line["sequences"] = json::array();
    for (const coordinator::Completion& c : completions) {
      json cj = CompletionJson(prompt_token_ids, c, top_logprobs, prefix_hit_tokens);
      cj.erase("prompt_token_ids");
      line["sequences"].push_back(cj);
    }
  }
  if (!error.empty()) line["error"] = error;
  return line;
}

void PrintCompletionsText(std::span<const coordinator::Completion> completions) {
  for (size_t k = 0; k < completions.size(); ++k) {
    std::printf("--- completion %zu (%s)\n%s\n", k,
                coordinator::FinishReasonName(completions[k].finish_reason),
                completions[k].text.c_str());
  }
}

}  // namespace tandem::client
