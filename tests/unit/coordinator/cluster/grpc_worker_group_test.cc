// GrpcWorkerGroup against an in-process TargetWorkerService on loopback: the
// scheduler over gRPC produces exactly the tokens it produces over the
// in-process LocalWorkerGroup (greedy, seeded, n > 1, shared prefix); the
// worker rejects malformed steps with INVALID_ARGUMENT and keeps serving; a
// lost worker turns Step into a prompt UNAVAILABLE.
#include "coordinator/cluster/grpc_worker_group.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "engine/model/cpu_model_runner.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "protocol/sampling_codec.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/default_model_test.h"
#include "tests/unit/engine/model/model_test_util.h"
#include "worker/worker_service.h"

namespace tandem::coordinator {
namespace {

constexpr int32_t kNumBlocks = 512;
constexpr int32_t kBlockSize = 16;

class Collect : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta& d) override {}
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<int64_t, RequestOutput> outputs;
};

// A TargetWorkerService served on 127.0.0.1 at a port the OS picks.
struct Server {
  // `listen_port` 0: the OS picks one.
  Server(model::Model* model, const worker::StepExecutorConfig& config, int listen_port = 0)
      : runner(std::make_unique<model::CpuModelRunner>(model)) {
    auto created = worker::TargetWorkerService::Create(runner.get(), config);
    CHECK(created.ok(), "%s", created.status().ToString());
    service = *std::move(created);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(listen_port),
                             grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    CHECK(server != nullptr && port > 0, "cannot start the test server");
  }
  ~Server() { Stop(); }
  void Stop() {
    if (server == nullptr) return;
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server->Wait();
    server.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  std::unique_ptr<model::CpuModelRunner> runner;  // declared first: the service uses it
  std::unique_ptr<worker::TargetWorkerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

class GrpcWorkerGroupTest : public testing::DefaultModelTest {
 protected:
  static worker::StepExecutorConfig ExecutorConfig() {
    worker::StepExecutorConfig ec;
    ec.num_blocks = kNumBlocks;
    ec.block_size = kBlockSize;
    ec.eos_token_ids = tokenizer_->EndOfGenerationIds();
    return ec;
  }

  // Runs `requests` to completion over `group`. Submits in two waves (the
  // second after the first finished) so the second wave hits the prefix cache.
  static std::map<int64_t, RequestOutput> Run(WorkerGroup* group,
                                              const std::vector<GenerateRequest>& first,
                                              const std::vector<GenerateRequest>& second) {
    Collect collect;
    SchedulerConfig config;
    config.max_num_batched_tokens = 32;  // chunked prefill beside decodes
    Scheduler scheduler(config, group, tokenizer_, &collect);
    for (const auto* wave : {&first, &second}) {
      for (const GenerateRequest& r : *wave) EXPECT_TRUE(scheduler.Submit(r).ok());
      for (int i = 0; i < 10000 && scheduler.HasWork(); ++i) {
        absl::StatusOr<bool> stepped = scheduler.Step();
        EXPECT_TRUE(stepped.ok()) << stepped.status();
        if (!stepped.ok()) break;
      }
    }
    EXPECT_FALSE(scheduler.HasWork());
    EXPECT_EQ(scheduler.kv_stats().num_blocks_used, 0);
    return collect.outputs;
  }

  static GenerateRequest Request(int64_t id, const std::string& text, int32_t max_tokens,
                                 float temperature, int32_t n = 1) {
    GenerateRequest r;
    r.id = RequestId(id);
    r.prompt_tokens = tokenizer_->Encode(text, true, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = 77 + id;
    r.params.ignore_eos = true;
    r.params.n = n;
    r.params.logprobs = 2;
    return r;
  }

};


TEST_F(GrpcWorkerGroupTest, SchedulerOverGrpcMatchesLocal) {
  const std::string shared =
      "You are a careful assistant. Answer briefly and precisely, citing facts where you can, "
      "and never invent sources. Keep a neutral tone. ";
  std::vector<GenerateRequest> first = {
      Request(1, "The capital of France is", 12, 0.0f),
      Request(2, "def add(a, b):\n", 10, 0.8f),
      Request(3, "Once upon a time, in a small village,", 14, 1.0f, /*n=*/2),
      Request(4, "1, 2, 3,", 8, 0.0f),
      Request(5, shared + "What is the boiling point of water?", 9, 0.0f),
      Request(6, "Water boils at", 11, 0.7f),
  };
  std::vector<GenerateRequest> second = {
      Request(7, shared + "What is the boiling point of water?", 9, 0.0f),
      Request(8, shared + "Name a prime number.", 7, 0.9f, /*n=*/2),
  };

  auto local = LocalWorkerGroup::Create(model_, ExecutorConfig());
  ASSERT_TRUE(local.ok()) << local.status();
  std::map<int64_t, RequestOutput> want = Run(local->get(), first, second);

  Server server(model_, ExecutorConfig());
  auto remote = GrpcWorkerGroup::Connect(server.address(), absl::Seconds(10));
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ((*remote)->info().vocab_size, model_->config().vocab_size);
  EXPECT_EQ((*remote)->info().num_blocks, kNumBlocks);
  EXPECT_EQ((*remote)->info().block_size, kBlockSize);
  EXPECT_EQ((*remote)->info().context_length, model_->config().context_length);
  EXPECT_EQ((*remote)->eos_token_ids(), tokenizer_->EndOfGenerationIds());
  std::map<int64_t, RequestOutput> got = Run(remote->get(), first, second);

  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), 8u);
  EXPECT_GT(got.at(7).prefix_hit_tokens, 0) << "the second wave should hit the prefix cache";
  for (const auto& [id, w] : want) {
    const RequestOutput& g = got.at(id);
    ASSERT_EQ(g.completions.size(), w.completions.size()) << "request " << id;
    for (size_t k = 0; k < w.completions.size(); ++k) {
      EXPECT_EQ(g.completions[k].token_ids, w.completions[k].token_ids)
          << "request " << id << " completion " << k;
      EXPECT_EQ(g.completions[k].text, w.completions[k].text);
      ASSERT_EQ(g.completions[k].logprobs.size(), w.completions[k].logprobs.size());
      for (size_t p = 0; p < w.completions[k].logprobs.size(); ++p) {
        EXPECT_EQ(g.completions[k].logprobs[p].logprob, w.completions[k].logprobs[p].logprob);
      }
    }
  }
  EXPECT_NE(got.at(3).completions[0].token_ids, got.at(3).completions[1].token_ids);
}

TEST_F(GrpcWorkerGroupTest, WorkerRejectsMalformedStepAndKeepsServing) {
  Server server(model_, ExecutorConfig());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = tandem::v1::TargetWorker::NewStub(channel);
  auto call = [&](const tandem::v1::StepRequest& request, tandem::v1::StepResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->Step(&context, request, response);
  };

  // A step for a sequence the worker never received.
  tandem::v1::StepRequest unknown;
  unknown.set_step_id(1);
  tandem::v1::SequenceStep* s = unknown.add_sequences();
  s->set_seq_id(42);
  s->add_tokens(1);
  s->add_new_block_ids(0);
  tandem::v1::StepResponse response;
  grpc::Status status = call(unknown, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("42"), std::string::npos) << status.error_message();

  // A new sequence with a token outside the vocabulary.
  tandem::v1::StepRequest bad_token;
  bad_token.set_step_id(2);
  tandem::v1::NewSequence* n = bad_token.add_new_sequences();
  n->set_seq_id(1);
  n->add_prompt_tokens(model_->config().vocab_size + 5);
  protocol::SamplingParamsToProto(sampling::SamplingParams{}, n->mutable_sampling());
  status = call(bad_token, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find(std::to_string(model_->config().vocab_size + 5)),
            std::string::npos)
      << status.error_message();

  // A valid step afterwards runs: the rejections changed nothing.
  tandem::v1::StepRequest good;
  good.set_step_id(3);
  n = good.add_new_sequences();
  n->set_seq_id(1);
  std::vector<int32_t> prompt = tokenizer_->Encode("Hello there", true, true);
  for (int32_t t : prompt) n->add_prompt_tokens(t);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  protocol::SamplingParamsToProto(greedy, n->mutable_sampling());
  s = good.add_sequences();
  s->set_seq_id(1);
  for (int32_t t : prompt) s->add_tokens(t);
  s->add_new_block_ids(3);
  s->set_sample(true);
  status = call(good, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.step_id(), 3);
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).seq_id(), 1);

  grpc::ClientContext context;
  tandem::v1::HealthResponse health;
  ASSERT_TRUE(stub->Health(&context, tandem::v1::HealthRequest{}, &health).ok());
  EXPECT_EQ(health.status(), tandem::v1::WORKER_STATUS_SERVING);
  EXPECT_EQ(health.num_sequences(), 1);
  EXPECT_EQ(health.last_step_id(), 3);

  // Draining: steps are refused, health says so.
  server.service->SetServing(false);
  good.set_step_id(4);
  good.clear_new_sequences();
  good.mutable_sequences(0)->clear_new_block_ids();
  status = call(good, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  grpc::ClientContext context2;
  ASSERT_TRUE(stub->Health(&context2, tandem::v1::HealthRequest{}, &health).ok());
  EXPECT_EQ(health.status(), tandem::v1::WORKER_STATUS_NOT_SERVING);
}

TEST_F(GrpcWorkerGroupTest, LostWorkerIsUnavailableQuicklyUntilReconnect) {
  Server server(model_, ExecutorConfig());
  auto group = GrpcWorkerGroup::Connect(server.address(), absl::Seconds(10));
  ASSERT_TRUE(group.ok()) << group.status();

  Collect collect;
  Scheduler scheduler(SchedulerConfig{}, group->get(), tokenizer_, &collect);
  ASSERT_TRUE(scheduler.Submit(Request(1, "Count to ten:", 50, 0.0f)).ok());
  ASSERT_TRUE(scheduler.Step().ok());
  server.Stop();

  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> stepped = scheduler.Step();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(stepped.status().code(), absl::StatusCode::kUnavailable) << stepped.status();
  EXPECT_NE(stepped.status().message().find(server.address()), std::string::npos)
      << stepped.status();
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE((*group)->broken());
  ASSERT_TRUE(collect.outputs.contains(1)) << "the failed step fails its request";

  // Broken until Reconnect; Reconnect fails while nobody listens.
  worker::StepPlan empty;
  empty.step_id = 99;
  EXPECT_EQ((*group)->Step(empty).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*group)->Reconnect(absl::Milliseconds(300)).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*group)->broken());

  // A worker back on the same port: Reconnect resets it and steps run again,
  // with the same tokens as a run that never failed.
  Server again(model_, ExecutorConfig(), server.port);
  ASSERT_EQ(again.port, server.port);
  ASSERT_TRUE((*group)->Reconnect(absl::Seconds(10)).ok());
  EXPECT_FALSE((*group)->broken());
  ASSERT_TRUE(scheduler.Submit(Request(2, "Count to ten:", 6, 0.0f)).ok());
  for (int i = 0; i < 1000 && scheduler.HasWork(); ++i) ASSERT_TRUE(scheduler.Step().ok());
  auto local = LocalWorkerGroup::Create(model_, ExecutorConfig());
  ASSERT_TRUE(local.ok());
  auto want = Run(local->get(), {Request(2, "Count to ten:", 6, 0.0f)}, {});
  EXPECT_EQ(collect.outputs.at(2).completions[0].token_ids, want.at(2).completions[0].token_ids);
}

TEST_F(GrpcWorkerGroupTest, ConnectToNobodyFailsWithinTheTimeout) {
  // A port just released by a server is very likely free.
  std::string address;
  {
    Server server(model_, ExecutorConfig());
    address = server.address();
  }
  auto start = std::chrono::steady_clock::now();
  auto group = GrpcWorkerGroup::Connect(address, absl::Milliseconds(500));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(group.status().code(), absl::StatusCode::kUnavailable) << group.status();
  EXPECT_NE(group.status().message().find(address), std::string::npos) << group.status();
  EXPECT_LT(seconds, 3.0);
}

}  // namespace
}  // namespace tandem::coordinator
