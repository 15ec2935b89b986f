// tandem::Client (the C++ SDK) against a scripted Inference server on
// 127.0.0.1: the request and response mapping, streams (callback, iterator,
// cancel), retries of UNAVAILABLE before the first event and never after,
// deadlines, health. The server scripts what a real coordinator cannot be
// made to do on cue (fail twice, then answer); the SDK against a real
// coordinator is tests/integration/cpp_sdk_test.py.
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "tandem/client.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem {
namespace {

namespace pb = tandem::v1;
using std::chrono::milliseconds;

// What the scripted server does with each call: the first `num_unavailable`
// calls fail with UNAVAILABLE; GenerateStream sends `stream` (then fails with
// `stream_error` if set); every call records its request.
class ScriptedInference final : public pb::Inference::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* context, const pb::GenerateRequest* request,
                        pb::GenerateResponse* response) override {
    RecordAuthorization(*context);
    if (grpc::Status s = Admit(*request); !s.ok()) return s;
    *response = unary_response;
    return grpc::Status::OK;
  }

  grpc::Status GenerateStream(grpc::ServerContext* context, const pb::GenerateRequest* request,
                              grpc::ServerWriter<pb::GenerateStreamResponse>* writer) override {
    RecordAuthorization(*context);
    if (grpc::Status s = Admit(*request); !s.ok()) return s;
    for (const pb::GenerateStreamResponse& msg : stream) writer->Write(msg);
    if (hold_open) {
      // Bounded: a test that holds the stream open cancels or times out well
      // before this.
      for (int i = 0; i < 500 && !context->IsCancelled(); ++i) {
        std::this_thread::sleep_for(milliseconds(10));
      }
      saw_cancel = context->IsCancelled();
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    return stream_error;
  }

  grpc::Status Tokenize(grpc::ServerContext*, const pb::TokenizeRequest* request,
                        pb::TokenizeResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    tokenize_requests.push_back(*request);
    response->add_token_ids(static_cast<int32_t>(request->text().size()));
    return grpc::Status::OK;
  }

  grpc::Status ModelInfo(grpc::ServerContext*, const pb::ModelInfoRequest*,
                         pb::ModelInfoResponse* response) override {
    response->set_model_name("scripted");
    response->set_vocab_size(49152);
    response->add_decoding_modes(pb::DECODING_MODE_BEAM_SEARCH);
    pb::WorkerGroupStatus* g = response->add_worker_groups();
    g->set_address("127.0.0.1:1");
    g->set_num_steps(7);
    g->set_healthy(true);
    return grpc::Status::OK;
  }

  int num_calls() {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(requests.size());
  }

  std::mutex mu;
  std::vector<pb::GenerateRequest> requests;
  std::vector<pb::TokenizeRequest> tokenize_requests;
  int num_unavailable = 0;
  pb::GenerateResponse unary_response;
  std::vector<pb::GenerateStreamResponse> stream;
  grpc::Status stream_error = grpc::Status::OK;
  bool hold_open = false;
  std::atomic<bool> saw_cancel{false};
  std::vector<std::string> authorizations;  // each Generate(Stream) call's, "" if none

 private:
  void RecordAuthorization(const grpc::ServerContext& context) {
    auto it = context.client_metadata().find("authorization");
    std::lock_guard<std::mutex> lock(mu);
    authorizations.push_back(it == context.client_metadata().end()
                                 ? ""
                                 : std::string(it->second.data(), it->second.size()));
  }

  grpc::Status Admit(const pb::GenerateRequest& request) {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(request);
    if (static_cast<int>(requests.size()) <= num_unavailable) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no worker group is reachable");
    }
    return grpc::Status::OK;
  }
};

// The scripted service on a free port of 127.0.0.1, with grpc.health.v1.
class ScriptedServer {
 public:
  ScriptedServer() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedServer() { server_->Shutdown(std::chrono::system_clock::now() + milliseconds(500)); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  grpc::HealthCheckServiceInterface* health() { return server_->GetHealthCheckService(); }

  ScriptedInference service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

ClientOptions FastRetries(int32_t max_retries) {
  ClientOptions o;
  o.timeout = milliseconds(10000);
  o.retry.max_retries = max_retries;
  o.retry.initial = milliseconds(5);
  o.retry.maximum = milliseconds(20);
  return o;
}

pb::GenerateStreamResponse Delta(int32_t index, const std::string& text,
                                 std::vector<int32_t> tokens, bool last = false) {
  pb::GenerateStreamResponse msg;
  msg.set_request_id("r1");
  pb::CompletionDelta* d = msg.add_deltas();
  d->set_index(index);
  d->set_text(text);
  d->mutable_token_ids()->Add(tokens.begin(), tokens.end());
  if (last) d->set_finish_reason(pb::FINISH_REASON_LENGTH);
  return msg;
}

// Two completions streamed in three messages, the last with usage.
std::vector<pb::GenerateStreamResponse> TwoCompletionStream() {
  std::vector<pb::GenerateStreamResponse> s = {Delta(0, "Hel", {1, 2}), Delta(1, "A", {7})};
  pb::GenerateStreamResponse last = Delta(0, "lo", {3}, /*last=*/true);
  pb::CompletionDelta* d = last.add_deltas();
  d->set_index(1);
  d->set_finish_reason(pb::FINISH_REASON_STOP);
  last.mutable_usage()->set_prompt_tokens(4);
  last.mutable_usage()->set_completion_tokens(4);
  last.mutable_usage()->set_cached_prompt_tokens(2);
  last.mutable_timings()->set_latency_ms(12.5);
  s.push_back(last);
  return s;
}

void ExpectTwoCompletions(const GenerateResult& r) {
  ASSERT_EQ(r.completions.size(), 2u);
  EXPECT_EQ(r.request_id, "r1");
  EXPECT_EQ(r.completions[0].text, "Hello");
  EXPECT_EQ(r.completions[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.completions[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.completions[1].text, "A");
  EXPECT_EQ(r.completions[1].index, 1);
  EXPECT_EQ(r.completions[1].finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.usage.prompt_tokens, 4);
  EXPECT_EQ(r.usage.cached_prompt_tokens, 2);
  EXPECT_DOUBLE_EQ(r.timings.latency_ms, 12.5);
}

TEST(SdkClientTest, RequestFieldsReachTheServerAsSet) {
  ScriptedServer server;
  Client client(server.address(), FastRetries(0));
  GenerateRequest request;
  request.prompt = std::vector<int32_t>{5, 6, 7};
  request.sampling.temperature = 0.0f;
  request.sampling.max_tokens = 9;
  request.sampling.stop = {"\n"};
  request.sampling.seed = 42;
  request.priority = 3;
  request.beam_search = BeamSearchOptions{.num_beams = 4, .early_stopping = EarlyStopping::kNever};
  ASSERT_TRUE(client.Generate(request).ok());
  const pb::GenerateRequest& p = server.service.requests.at(0);
  EXPECT_EQ(std::vector<int32_t>(p.token_ids().ids().begin(), p.token_ids().ids().end()),
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_TRUE(p.sampling().has_temperature());
  EXPECT_EQ(p.sampling().max_tokens(), 9);
  EXPECT_EQ(p.sampling().seed(), 42u);
  EXPECT_FALSE(p.sampling().has_top_p());  // unset stays unset: the server's default
  EXPECT_EQ(p.sampling().stop(0), "\n");
  EXPECT_EQ(p.priority(), 3);
  EXPECT_EQ(p.decoding_mode(), pb::DECODING_MODE_BEAM_SEARCH);
  EXPECT_EQ(p.beam_search().num_beams(), 4);
  EXPECT_EQ(p.beam_search().early_stopping(), pb::EARLY_STOPPING_NEVER);
  EXPECT_FALSE(p.beam_search().has_length_penalty());
}

TEST(SdkClientTest, ChatAndSpeculativeRequests) {
  ScriptedServer server;
  Client client(server.address(), FastRetries(0));
  GenerateRequest options;
  options.speculative = SpeculativeOptions{.num_speculative_tokens = 3, .draft = "ngram"};
  ASSERT_TRUE(client.Chat({{"system", "Be brief."}, {"user", "Hi"}}, options).ok());
  const pb::GenerateRequest& p = server.service.requests.at(0);
  ASSERT_EQ(p.chat().messages_size(), 2);
  EXPECT_EQ(p.chat().messages(1).content(), "Hi");
  EXPECT_TRUE(p.chat().add_generation_prompt());
  EXPECT_EQ(p.decoding_mode(), pb::DECODING_MODE_SPECULATIVE);
  EXPECT_EQ(p.speculative().num_speculative_tokens(), 3);
  EXPECT_EQ(p.speculative().draft(), "ngram");
}

TEST(SdkClientTest, UnaryResponseIsMapped) {
  ScriptedServer server;
  pb::Completion* c = server.service.unary_response.add_completions();
  c->set_text("Paris");
  c->add_token_ids(11);
  c->set_finish_reason(pb::FINISH_REASON_STOP);
  c->set_score(-0.5);
  pb::PositionLogprobs* lp = c->add_logprobs();
  lp->set_token(11);
  lp->set_logprob(-0.25f);
  pb::TokenLogprob* alt = lp->add_top_logprobs();
  alt->set_token(12);
  alt->set_logprob(-2.0f);
  server.service.unary_response.set_error("");
  Client client(server.address(), FastRetries(0));
  absl::StatusOr<GenerateResult> r = client.Generate({.prompt = std::string("x")});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->completions.size(), 1u);
  EXPECT_EQ(r->completions[0].text, "Paris");
  EXPECT_EQ(r->completions[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(r->completions[0].score, -0.5);
  ASSERT_EQ(r->completions[0].logprobs.size(), 1u);
  EXPECT_EQ(r->completions[0].logprobs[0].top.at(0).token, 12);
  EXPECT_STREQ(FinishReasonName(r->completions[0].finish_reason), "stop");
}

TEST(SdkClientTest, StreamWithCallbackAssemblesTheResult) {
  ScriptedServer server;
  server.service.stream = TwoCompletionStream();
  Client client(server.address(), FastRetries(0));
  int events = 0;
  std::string streamed;
  absl::StatusOr<GenerateResult> r =
      client.Stream({.prompt = std::string("x")}, [&](const StreamEvent& e) {
        ++events;
        for (const CompletionDelta& d : e.deltas) {
          if (d.index == 0) streamed += d.text;
        }
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(events, 3);
  EXPECT_EQ(streamed, "Hello");
  ExpectTwoCompletions(*r);
}

TEST(SdkClientTest, StreamIteratorYieldsEveryEvent) {
  ScriptedServer server;
  server.service.stream = TwoCompletionStream();
  Client client(server.address(), FastRetries(0));
  absl::StatusOr<GenerationStream> stream = client.OpenStream({.prompt = std::string("x")});
  ASSERT_TRUE(stream.ok()) << stream.status();
  ResultAssembler assembler;
  int events = 0;
  for (const StreamEvent& e : *stream) {
    assembler.Add(e);
    ++events;
  }
  EXPECT_EQ(events, 3);
  EXPECT_TRUE(stream->status().ok());
  ExpectTwoCompletions(assembler.result());
}

TEST(SdkClientTest, BeamSequencesReplaceTheDeltas) {
  ScriptedServer server;
  pb::GenerateStreamResponse first = Delta(0, "a b", {1, 2});
  first.mutable_deltas(0)->set_replace(true);
  pb::GenerateStreamResponse last = Delta(0, "a c", {1, 3});
  last.mutable_deltas(0)->set_replace(true);
  for (const char* text : {"a c", "a b"}) {
    pb::Completion* s = last.add_sequences();
    s->set_text(text);
    s->set_score(-1.0);
  }
  server.service.stream = {first, last};
  Client client(server.address(), FastRetries(0));
  absl::StatusOr<GenerateResult> r = client.Stream({.prompt = std::string("x")}, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->completions.size(), 2u);
  EXPECT_EQ(r->completions[0].text, "a c");
  EXPECT_EQ(r->completions[1].text, "a b");
}

TEST(SdkClientTest, UnavailableBeforeTheFirstEventIsRetried) {
  ScriptedServer server;
  server.service.num_unavailable = 2;
  server.service.stream = TwoCompletionStream();
  Client client(server.address(), FastRetries(3));
  absl::StatusOr<GenerateResult> r = client.Stream({.prompt = std::string("x")}, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server.service.num_calls(), 3);
  ExpectTwoCompletions(*r);
}

TEST(SdkClientTest, RetriesStopAtTheLimit) {
  ScriptedServer server;
  server.service.num_unavailable = 10;
  Client client(server.address(), FastRetries(2));
  absl::StatusOr<GenerateResult> r = client.Generate({.prompt = std::string("x")});
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), "no worker group is reachable");
  EXPECT_EQ(server.service.num_calls(), 3);
}

TEST(SdkClientTest, UnavailableAfterAnEventIsNotRetried) {
  ScriptedServer server;
  server.service.stream = {Delta(0, "He", {1})};
  server.service.stream_error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker lost");
  Client client(server.address(), FastRetries(3));
  int events = 0;
  absl::StatusOr<GenerateResult> r =
      client.Stream({.prompt = std::string("x")}, [&](const StreamEvent&) { ++events; });
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_EQ(events, 1);
  EXPECT_EQ(server.service.num_calls(), 1);
}

TEST(SdkClientTest, InvalidArgumentIsNotRetriedAndKeepsTheMessage) {
  ScriptedServer server;
  server.service.stream_error =
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sampling.top_p 2 must be in (0, 1]");
  Client client(server.address(), FastRetries(3));
  absl::StatusOr<GenerationStream> s = client.OpenStream({.prompt = std::string("x")});
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  EXPECT_EQ(s.status().message(), "sampling.top_p 2 must be in (0, 1]");
  EXPECT_EQ(server.service.num_calls(), 1);
}

TEST(SdkClientTest, DestroyingAStreamCancelsIt) {
  ScriptedServer server;
  server.service.stream = {Delta(0, "He", {1})};
  server.service.hold_open = true;
  Client client(server.address(), FastRetries(0));
  {
    absl::StatusOr<GenerationStream> s = client.OpenStream({.prompt = std::string("x")});
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->Next().has_value());
  }
  for (int i = 0; i < 200 && !server.service.saw_cancel; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(server.service.saw_cancel);
}

TEST(SdkClientTest, CancelEndsTheStreamWithCancelled) {
  ScriptedServer server;
  server.service.stream = {Delta(0, "He", {1})};
  server.service.hold_open = true;
  Client client(server.address(), FastRetries(0));
  absl::StatusOr<GenerationStream> s = client.OpenStream({.prompt = std::string("x")});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->Next().has_value());
  s->Cancel();
  EXPECT_FALSE(s->Next().has_value());
  EXPECT_TRUE(absl::IsCancelled(s->status())) << s->status();
}

TEST(SdkClientTest, DeadlineEndsAStreamThatTakesTooLong) {
  ScriptedServer server;
  server.service.stream = {Delta(0, "He", {1})};
  server.service.hold_open = true;
  ClientOptions options = FastRetries(0);
  options.timeout = milliseconds(300);
  Client client(server.address(), options);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<GenerateResult> r = client.Stream({.prompt = std::string("x")}, nullptr);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(SdkClientTest, NothingListeningIsUnavailableWithinTheRetries) {
  int port = 0;
  {
    ScriptedServer gone;  // a port that was free a moment ago, now closed
    port = std::stoi(gone.address().substr(gone.address().rfind(':') + 1));
  }
  Client client("127.0.0.1:" + std::to_string(port), FastRetries(2));
  absl::StatusOr<std::vector<int32_t>> ids = client.Tokenize("hello");
  EXPECT_TRUE(absl::IsUnavailable(ids.status())) << ids.status();
  EXPECT_FALSE(client.IsConnected());
}

TEST(SdkClientTest, SendsTheApiKeyWithEveryCall) {
  ScriptedServer server;
  server.service.stream = TwoCompletionStream();
  ClientOptions options = FastRetries(0);
  options.api_key = "tk-123";
  Client client(server.address(), options);
  ASSERT_TRUE(client.Generate({.prompt = std::string("x")}).ok());
  ASSERT_TRUE(client.Stream({.prompt = std::string("x")}, nullptr).ok());
  Client keyless(server.address(), FastRetries(0));
  ASSERT_TRUE(keyless.Generate({.prompt = std::string("x")}).ok());
  EXPECT_EQ(server.service.authorizations,
            (std::vector<std::string>{"Bearer tk-123", "Bearer tk-123", ""}));
}

TEST(SdkClientTest, AKeyGrpcCannotCarryFailsEveryCallWithoutSending) {
  ScriptedServer server;
  for (const char* bad : {"tk\n", "t k", "tk\xc3\xa9"}) {
    ClientOptions options = FastRetries(0);
    options.api_key = bad;
    Client client(server.address(), options);
    absl::StatusOr<GenerateResult> r = client.Generate({.prompt = std::string("x")});
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_EQ(std::string(r.status().message()).find(bad), std::string::npos);
    EXPECT_TRUE(absl::IsInvalidArgument(client.Tokenize("hi").status()));
    EXPECT_TRUE(absl::IsInvalidArgument(client.Health().status()));
  }
  EXPECT_EQ(server.service.num_calls(), 0);
}

TEST(SdkClientTest, AnUnusableTlsCaFileFailsEveryCallNamingIt) {
  ScriptedServer server;
  const std::string not_pem = ::testing::TempDir() + "/sdk_client_test_not_a_ca.pem";
  std::ofstream(not_pem) << "not a certificate\n";
  const std::string missing = ::testing::TempDir() + "/sdk_client_test_missing_ca.pem";
  for (const auto& [file, code] : {std::pair{missing, absl::StatusCode::kNotFound},
                                   std::pair{not_pem, absl::StatusCode::kInvalidArgument}}) {
    ClientOptions options = FastRetries(0);
    options.tls_ca_file = file;
    Client client(server.address(), options);
    for (const absl::Status& s : {client.Tokenize("hi").status(), client.Health().status(),
                                  client.OpenStream({.prompt = std::string("x")}).status()}) {
      EXPECT_EQ(s.code(), code) << s;
      EXPECT_NE(std::string(s.message()).find("'" + file + "'"), std::string::npos) << s;
    }
  }
  // Never a plaintext fallback: nothing reached the server.
  EXPECT_EQ(server.service.num_calls(), 0);
  EXPECT_TRUE(server.service.tokenize_requests.empty());
}

TEST(SdkClientTest, TlsToAPlaintextServerIsUnavailable) {
  ScriptedServer server;
  ClientOptions options = FastRetries(0);
  options.tls = true;  // the system's roots: the handshake fails before any certificate
  Client client(server.address(), options);
  EXPECT_TRUE(absl::IsUnavailable(client.Tokenize("hi").status()));
  EXPECT_TRUE(server.service.tokenize_requests.empty());
}

TEST(SdkClientTest, TokenizeModelInfoAndHealth) {
  ScriptedServer server;
  Client client(server.address(), FastRetries(0));
  absl::StatusOr<std::vector<int32_t>> ids = client.Tokenize("hello");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{5}));
  absl::StatusOr<ModelInfo> info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->model_name, "scripted");
  EXPECT_TRUE(info->beam_search);
  EXPECT_FALSE(info->speculative);
  ASSERT_EQ(info->worker_groups.size(), 1u);
  EXPECT_EQ(info->worker_groups[0].num_steps, 7);
  server.health()->SetServingStatus("tandem.v1.Inference", false);
  EXPECT_EQ(client.Health("tandem.v1.Inference").value(), ServingStatus::kNotServing);
  EXPECT_EQ(client.Health().value(), ServingStatus::kServing);
  EXPECT_TRUE(client.IsConnected());
}

}  // namespace
}  // namespace tandem
