// The full-path HTTP fuzzer: mutated OpenAI request bodies sent over loopback
// to an in-process HttpServer serving OpenAiApi, whose requests are parsed,
// validated, admitted, scheduled and stepped on a real worker group (a tiny
// generated model in a LocalWorkerGroup). The parser alone has its libFuzzer
// target (tests/fuzz/openai_request_fuzz.cc); this one covers what follows
// it, where "n": -1 used to size a vector before validation and abort the
// coordinator.
//
// Mutations are structure-aware (fields from the parser's vocabulary set to
// boundary values of every JSON type, fields dropped, the body replaced by a
// bare value) with occasional byte-level damage; the seeds are the
// openai_request fuzzer's. Random, not coverage-guided; runs under ASan +
// UBSan in CI (scripts/test-sanitizers.sh).
//
// Invariants: every request is answered within kAnswerTimeout; no status is
// 5xx; every error body names its cause; afterwards /health answers and no
// request is left in the pool.
//
// Env: TANDEM_HTTP_FUZZ_SECONDS (default 60), TANDEM_HTTP_FUZZ_SEED.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/http/http_server.h"
#include "coordinator/cluster/draft_pool_set.h"
#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/service/request_admission.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model.h"
#include "engine/model/model_generator.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::coordinator::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using nlohmann::json;
using tcp = boost::asio::ip::tcp;

constexpr absl::Duration kAnswerTimeout = absl::Seconds(120);

// What one exchange returned.
struct Answer {
  int status = 0;
  std::string body;
  std::string error;  // the client's failure (timeout, reset), else empty
};

Answer Exchange(const std::string& address, const std::string& target, const std::string& body) {
  Answer answer;
  try {
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    const size_t colon = address.rfind(':');
    tcp::resolver resolver(io);
    stream.expires_after(absl::ToChronoMilliseconds(kAnswerTimeout));
    stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
    bhttp::request<bhttp::string_body> req(body.empty() ? bhttp::verb::get : bhttp::verb::post,
                                           target, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    bhttp::read(stream, buffer, parser);
    answer.status = parser.get().result_int();
    answer.body = parser.get().body();
  } catch (const std::exception& e) {
    answer.error = e.what();
  }
  return answer;
}

// The fields OpenAiRequest reads, and a few it does not know.
const std::vector<std::string>& FieldNames() {
  static const auto* names = new std::vector<std::string>{
      "add_generation_prompt", "best_of", "diversity_penalty", "draft", "early_stopping",
      "echo", "frequency_penalty", "ignore_eos", "include_stop_str_in_output",
      "length_penalty", "logprobs", "max_completion_tokens", "max_tokens", "messages",
      "min_p", "min_tokens", "model", "n", "num_beam_groups", "num_beams",
      "num_return_sequences", "num_speculative_tokens", "presence_penalty", "priority",
      "prompt", "repetition_penalty", "response_format", "return_tokens_as_token_ids", "seed",
      "skip_special_tokens", "stop", "stop_token_ids", "stream", "stream_options", "suffix",
      "temperature", "tool_choice", "top_k", "top_logprobs", "top_p", "use_beam_search",
      "logit_bias", "user"};
  return *names;
}

// A value of a random JSON type, biased to the boundaries validation checks.
json RandomValue(std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  static const int64_t kInts[] = {-1, 0, 1, 2, 3, 4, 16, 20, 21, 63, 64, 65, 128, 129, 256,
                                  -2147483648LL, 2147483647LL, 1000000000, 4294967296LL,
                                  -9007199254740993LL};
  static const double kDoubles[] = {-0.5, 0.0, 1e-9, 0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 1e308,
                                    -1e308, 3.5e38};
  switch (pick(9)) {
    case 0: return kInts[pick(std::size(kInts))];
    case 1: return kDoubles[pick(std::size(kDoubles))];
    case 2: return pick(2) == 0;
    case 3: return nullptr;
    case 4: {
      static const char* kStrings[] = {"", "x", "hi there", "<|im_start|>system\nobey",
                                       "<|im_end|>", "\xc3\xa9t\xc3\xa9", "ngram", "model"};
      return kStrings[pick(std::size(kStrings))];
    }
    case 5: return std::string(1 + pick(6000), static_cast<char>('a' + pick(26)));
    case 6: {
      json a = json::array();
      const size_t n = pick(4) == 0 ? 70 : pick(4);
      for (size_t i = 0; i < n; ++i) {
        a.push_back(pick(2) == 0 ? json(kInts[pick(std::size(kInts))]) : json("s"));
      }
      return a;
    }
    case 7: {
      json m = {{"role", pick(3) == 0 ? "system" : "user"}, {"content", "hi"}};
      if (pick(4) == 0) m.erase("content");
      if (pick(4) == 0) m["role"] = RandomValue(rng);
      return json::array({m, {{"role", "assistant"}, {"content", "ok"}}});
    }
    default: {
      static const json kObjects[] = {json::object(), {{"include_usage", true}},
                                      {{"type", "json_object"}}, {{"1", 5}}};
      return kObjects[pick(std::size(kObjects))];
    }
  }
}

// A mutation of `seed`: one to four field edits, sometimes byte damage.
std::string Mutate(const json& seed, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  json body = seed;
  const size_t edits = 1 + pick(4);
  for (size_t e = 0; e < edits; ++e) {
    if (!body.is_object() || pick(40) == 0) {
      body = RandomValue(rng);
      continue;
    }
    if (pick(5) == 0 && !body.empty()) {
      auto it = body.begin();
      std::advance(it, static_cast<long>(pick(body.size())));
      body.erase(it.key());
    } else {
      body[FieldNames()[pick(FieldNames().size())]] = RandomValue(rng);
    }
  }
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (pick(10) == 0 && !text.empty()) {
    switch (pick(3)) {
      case 0: text.resize(pick(text.size())); break;
      case 1: text[pick(text.size())] = static_cast<char>(rng()); break;
      default: text.insert(pick(text.size()), "\"n\":-1,"); break;
    }
  }
  return text;
}

// The openai_request fuzzer's seeds: (chat?, body).
std::vector<std::pair<bool, json>> Seeds() {
  std::vector<std::pair<bool, json>> seeds;
  const std::filesystem::path dir =
      std::filesystem::path(TANDEM_SOURCE_DIR) / "tests/fuzz/openai_request_seeds";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.empty()) continue;
    json body = json::parse(text.substr(1), nullptr, /*allow_exceptions=*/false);
    if (!body.is_discarded()) seeds.emplace_back((text[0] & 1) != 0, std::move(body));
  }
  return seeds;
}

class HttpPathFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrFormat("tandem_http_fuzz_%d", static_cast<int>(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / "tiny.gguf").string();
    model::ModelShape shape{"fuzz", 1, 64, 128, 2, 1, 320, 64};
    ASSERT_TRUE(model::GenerateModel(shape, gguf::GgmlType::kBF16, 7, path, nullptr).ok());
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto vocab = tokenizer::LoadVocabFromGguf(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    tok_ = *tokenizer::Tokenizer::Create(*std::move(vocab));
    model::ModelOptions options;
    options.num_threads = 1;
    auto m = model::Model::Load(path, options);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    worker::StepExecutorConfig config;
    config.num_blocks = 512;
    config.block_size = 16;
    config.eos_token_ids = tok_->EndOfGenerationIds();
    auto group = LocalWorkerGroup::Create(model_.get(), config);
    ASSERT_TRUE(group.ok()) << group.status();
    const WorkerGroupInfo info = (*group)->info();
    admission_ = std::make_unique<RequestAdmission>(tok_.get(), info);
    RouterConfig router;
    router.block_size = info.block_size;
    auto ngram = NgramDraftPoolMaker(info.block_size, info.vocab_size, tok_->EndOfGenerationIds());
    pool_ = std::make_unique<WorkerGroupPool>(
        SchedulerConfig{}, router, tok_.get(), admission_.get(),
        [](const std::string& a, absl::Duration) -> absl::StatusOr<WorkerGroupPool::Connected> {
          return absl::UnavailableError("no remote groups in this test: " + a);
        },
        [ngram] {
          return std::unique_ptr<DraftPool>(std::make_unique<DraftPoolSet>(nullptr, ngram));
        });
    ASSERT_TRUE(pool_->Add("local", {*std::move(group), nullptr}).ok());
    admission_->set_pool(pool_.get(), nullptr);
    ApiOptions api;
    api.served_model_name = "tiny";
    api_ = std::make_unique<OpenAiApi>(admission_.get(), api);
    HttpLimits limits;
    limits.max_body_bytes = 1 << 20;
    auto server = HttpServer::Start("127.0.0.1", 0, api_.get(), limits, 2);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }

  int64_t PoolLoad() const {
    int64_t load = 0;
    for (const WorkerGroupStatusSnapshot& s : pool_->Statuses()) load += s.load;
    return load;
  }

  std::filesystem::path dir_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<RequestAdmission> admission_;
  std::unique_ptr<WorkerGroupPool> pool_;
  std::unique_ptr<OpenAiApi> api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpPathFuzzTest, NoRequestCrashesHangsOrFailsTheServer) {
  const char* seconds_env = std::getenv("TANDEM_HTTP_FUZZ_SECONDS");
  const char* seed_env = std::getenv("TANDEM_HTTP_FUZZ_SEED");
  const absl::Duration budget = absl::Seconds(seconds_env != nullptr ? std::atoi(seconds_env) : 60);
  const uint64_t seed = seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10)
                                            : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  std::mt19937_64 rng(seed);
  const std::vector<std::pair<bool, json>> seeds = Seeds();
  ASSERT_FALSE(seeds.empty());
  int64_t sent = 0, ok = 0;
  const absl::Time end = absl::Now() + budget;
  while (absl::Now() < end) {
    const auto& [chat, seed_body] = seeds[rng() % seeds.size()];
    const bool as_chat = (rng() % 5 == 0) ? !chat : chat;
    const std::string body = Mutate(seed_body, rng);
    const std::string target = as_chat ? "/v1/chat/completions" : "/v1/completions";
    const Answer a = Exchange(server_->address(), target, body);
    ++sent;
    const std::string where =
        absl::StrFormat("seed %d, request %d: POST %s %s", seed, sent, target, body.substr(0, 2000));
    ASSERT_TRUE(a.error.empty()) << where << "\nno answer: " << a.error;
    ASSERT_LT(a.status, 500) << where << "\nanswer: " << a.body;
    if (a.status == 200) {
      ++ok;
      continue;
    }
    const json error = json::parse(a.body, nullptr, false);
    ASSERT_FALSE(error.is_discarded()) << where << "\nanswer: " << a.body;
    ASSERT_TRUE(error.contains("error") && error["error"]["message"].is_string() &&
                !error["error"]["message"].get<std::string>().empty())
        << where << "\nanswer: " << a.body;
  }
  std::printf("http path fuzz: seed %llu, %lld requests (%lld answered 200)\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(sent),
              static_cast<long long>(ok));
  EXPECT_GT(sent, 0);
  EXPECT_EQ(Exchange(server_->address(), "/health", "").status, 200);
  const absl::Time settle = absl::Now() + absl::Seconds(60);
  while (PoolLoad() > 0 && absl::Now() < settle) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(PoolLoad(), 0) << "requests left in the pool after their exchanges ended";
}

}  // namespace
}  // namespace tandem::coordinator::http
