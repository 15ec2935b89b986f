// tandem-sdk-example ADDR PROMPT [MAX_TOKENS]: the C++ SDK's calls, one of
// each, against the coordinator at ADDR. Greedy, so every way of generating
// prints the same tokens:
//   health SERVING
//   model NAME vocab N
//   prompt ID ID ...            (Tokenize)
//   generate ID ID ...          (unary Generate)
//   stream ID ID ...            (GenerationStream, iterated)
//   callback ID ID ...          (Stream with a callback)
//   text TEXT                   (the streamed text, as it arrived)
//   error CODE: MESSAGE         (a request the server rejects)
// Exit 1 with the status on stderr when a call that should work fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/client.h"

namespace {

void PrintIds(const char* label, const std::vector<int32_t>& ids) {
  std::printf("%s", label);
  for (int32_t id : ids) std::printf(" %d", id);
  std::printf("\n");
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "tandem-sdk-example: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tandem-sdk-example ADDR PROMPT [MAX_TOKENS]\n");
    return 2;
  }
  tandem::ClientOptions options;
  options.timeout = std::chrono::seconds(60);
  tandem::Client client(argv[1], options);

  absl::StatusOr<tandem::ServingStatus> health = client.Health();
  if (!health.ok()) return Fail("Health", health.status());
  std::printf("health %s\n", tandem::ServingStatusName(*health));
  absl::StatusOr<tandem::ModelInfo> info = client.GetModelInfo();
  if (!info.ok()) return Fail("GetModelInfo", info.status());
  std::printf("model %s vocab %d\n", info->model_name.c_str(), info->vocab_size);
  absl::StatusOr<std::vector<int32_t>> prompt_ids = client.Tokenize(argv[2]);
  if (!prompt_ids.ok()) return Fail("Tokenize", prompt_ids.status());
  PrintIds("prompt", *prompt_ids);

  tandem::GenerateRequest request;
  request.prompt = std::string(argv[2]);
  request.sampling.temperature = 0.0f;
  request.sampling.max_tokens = argc > 3 ? std::atoi(argv[3]) : 16;

  absl::StatusOr<tandem::GenerateResult> unary = client.Generate(request);
  if (!unary.ok()) return Fail("Generate", unary.status());
  PrintIds("generate", unary->completions.at(0).token_ids);

  absl::StatusOr<tandem::GenerationStream> stream = client.OpenStream(request);
  if (!stream.ok()) return Fail("OpenStream", stream.status());
  std::vector<int32_t> streamed;
  std::string text;
  for (const tandem::StreamEvent& event : *stream) {
    for (const tandem::CompletionDelta& d : event.deltas) {
      streamed.insert(streamed.end(), d.token_ids.begin(), d.token_ids.end());
      text += d.text;
    }
  }
  if (!stream->status().ok()) return Fail("GenerationStream", stream->status());
  PrintIds("stream", streamed);

  absl::StatusOr<tandem::GenerateResult> called =
      client.Stream(request, [](const tandem::StreamEvent&) {});
  if (!called.ok()) return Fail("Stream", called.status());
  PrintIds("callback", called->completions.at(0).token_ids);
  std::printf("text %s\n", text.c_str());

  tandem::GenerateRequest bad = request;
  bad.sampling.top_p = 2.0f;
  absl::StatusOr<tandem::GenerateResult> rejected = client.Generate(bad);
  std::printf("error %s\n", rejected.status().ToString().c_str());
  return rejected.ok() ? 1 : 0;
}
