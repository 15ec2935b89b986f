#include "client/commands/bench_command.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "client/bench_request.h"
#include "client/bench_stats.h"
#include "client/bench_workload.h"
#include "client/command_failure.h"
#include "client/inference_client.h"
#include "client/openai_bench_client.h"
#include "client/step_overhead.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::client {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int32_t kMaxConcurrency = 4096;
constexpr int32_t kMaxNumRequests = 1000000;
constexpr double kMaxRequestRate = 1e6;
// Open loop: requests in flight at once at most (a request that arrives while
// all are busy is sent when one frees; its latency counts from then).
constexpr int32_t kMaxRateWorkers = 1024;
constexpr int32_t kModelInfoTimeoutS = 30;
// Random prompts for an OpenAI server draw ids below this unless --vocab-size
// says otherwise: every vocabulary tandem and its peers serve has at least
// this many tokens.
constexpr int32_t kDefaultOpenAiVocab = 32000;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }


RequestRecord RunGrpcRequest(tandem::Client& client, const JsonRequest& request) {
  RequestRecord rec;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_token;
  absl::StatusOr<tandem::GenerationStream> stream = client.OpenStream(SdkRequest(request));
  if (stream.ok()) {
    for (const tandem::StreamEvent& event : *stream) {
      const Clock::time_point now = Clock::now();
      int64_t tokens = 0;
      for (const tandem::CompletionDelta& d : event.deltas) tokens += d.token_ids.size();
      if (tokens > 0) {
        if (rec.output_tokens == 0) {
          rec.ttft_s = Seconds(now - start);
        } else {
          rec.itl_s.push_back(Seconds(now - last_token));
        }
        last_token = now;
        rec.output_tokens += tokens;
      }
      if (event.usage && event.usage->prompt_tokens > 0) {
        rec.input_tokens = event.usage->prompt_tokens;
      }
      if (!event.error.empty()) rec.error = event.error;
    }
  }
  const absl::Status status = stream.ok() ? stream->status() : stream.status();
  rec.e2e_s = Seconds(Clock::now() - start);
  if (!status.ok()) rec.error = DescribeStatus(status);
  if (rec.input_tokens == 0 && request.prompt_token_ids) {
    rec.input_tokens = static_cast<int64_t>(request.prompt_token_ids->size());
  }
  rec.ok = rec.error.empty();
  return rec;
}

// --backend and where it points.
absl::Status ValidateTarget(const BenchOptions& o) {
  if (o.backend != "tandem" && o.backend != "openai") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--backend '%s' must be tandem or openai", o.backend));
  }
  if (o.backend == "tandem" && o.addr.empty()) {
    return absl::InvalidArgumentError("--addr HOST:PORT is required (--backend tandem)");
  }
  if (o.backend == "openai" && o.url.empty()) {
    return absl::InvalidArgumentError("--url http://HOST:PORT/v1 is required (--backend openai)");
  }
  if (o.vocab_size < 0 || (o.vocab_size > 0 && o.vocab_size <= kMinRandomTokenId)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--vocab-size %d is out of range: must be 0 (default) or > %d", o.vocab_size,
        kMinRandomTokenId));
  }
  return absl::OkStatus();
}

absl::Status Validate(const BenchOptions& o) {
  RETURN_IF_ERROR(ValidateTarget(o));
  const bool closed = o.concurrency != 0;
  const bool open = o.request_rate != 0;
  if (closed == open) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "give exactly one of --concurrency (got %d) or --request-rate (got %g)", o.concurrency,
        o.request_rate));
  }
  if (closed && (o.concurrency < 1 || o.concurrency > kMaxConcurrency)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--concurrency %d is out of range: must be in [1, %d]", o.concurrency, kMaxConcurrency));
  }
  if (open && !(o.request_rate > 0 && o.request_rate <= kMaxRequestRate)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--request-rate %g is out of range: must be in (0, %g]", o.request_rate,
        kMaxRequestRate));
  }
  if (o.num_requests < 1 || o.num_requests > kMaxNumRequests) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--num-requests %d is out of range: must be in [1, %d]", o.num_requests,
        kMaxNumRequests));
  }
  if (o.output_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--output-len %d is out of range: must be >= 1", o.output_len));
  }
  if (!o.dataset.empty() && o.shared_prefix_len != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--shared-prefix-len %d applies only to random prompts, not with --dataset",
        o.shared_prefix_len));
  }
  if (o.timeout_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--timeout-s %d is out of range: must be >= 0", o.timeout_s));
  }
  return absl::OkStatus();
}

// Closed loop: `concurrency` clients, each sending its next request when the
// previous one ends.
void RunClosedLoop(const RequestRunner& run, const std::vector<JsonRequest>& requests,
                   const BenchOptions& o, std::vector<RequestRecord>& records) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const size_t num_threads = std::min<size_t>(o.concurrency, requests.size());
  for (size_t t = 0; t < num_threads; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
        records[i] = run(requests[i]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// Open loop: request i is released at the sum of i + 1 exponential gaps of
// mean 1 / request_rate (a Poisson process), whatever the server's pace.
void RunOpenLoop(const RequestRunner& run, const std::vector<JsonRequest>& requests,
                 const BenchOptions& o, std::vector<RequestRecord>& records) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> released;
  bool done = false;
  std::vector<std::thread> workers;
  const size_t num_workers = std::min<size_t>(kMaxRateWorkers, requests.size());
  for (size_t t = 0; t < num_workers; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        size_t i;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !released.empty(); });
          if (released.empty()) return;
          i = released.front();
          released.pop_front();
        }
        records[i] = run(requests[i]);
      }
    });
  }
  std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ull);  // independent of the prompts' stream
  std::exponential_distribution<double> gap(o.request_rate);
  const Clock::time_point start = Clock::now();
  double at_s = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    at_s += gap(rng);
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(at_s)));
    {
      std::lock_guard<std::mutex> lock(mu);
      released.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : workers) t.join();
}

// ModelInfo, bounded by the request deadline (at most kModelInfoTimeoutS).
absl::StatusOr<tandem::ModelInfo> GetModelInfo(const BenchOptions& o) {
  const int32_t timeout_s =
      o.timeout_s > 0 ? std::min(o.timeout_s, kModelInfoTimeoutS) : kModelInfoTimeoutS;
  return NewClient(o.addr, timeout_s, o.tls_ca)->GetModelInfo();
}

std::vector<GroupStepCounters> StepCounters(const tandem::ModelInfo& info) {
  std::vector<GroupStepCounters> groups;
  for (const tandem::WorkerGroupStatus& g : info.worker_groups) {
    groups.push_back({.address = g.address,
                      .num_steps = g.num_steps,
                      .step_ms = g.step_ms,
                      .worker_step_ms = g.worker_step_ms,
                      .num_speculative_rounds = g.num_speculative_rounds,
                      .num_draft_tokens = g.num_draft_tokens,
                      .num_accepted_tokens = g.num_accepted_tokens});
  }
  return groups;
}

// null when the server reported no step counters that moved during the run.
json StepOverheadJson(const std::optional<StepOverhead>& o) {
  if (!o) return nullptr;
  return {{"num_groups", o->num_groups},
          {"num_steps", o->num_steps},
          {"step_ms", o->step_ms},
          {"worker_step_ms", o->worker_step_ms},
          {"mean_step_ms", o->mean_step_ms()},
          {"mean_worker_step_ms", o->mean_worker_step_ms()},
          {"overhead_share", o->overhead_share()}};
}

// The run's speculation (null without step counters or without rounds):
// acceptance = accepted / verified drafts, tokens per round = 1 + accepted
// / rounds.
json SpeculationJson(const std::optional<StepOverhead>& o) {
  if (!o || o->num_speculative_rounds == 0) return nullptr;
  const double rounds = static_cast<double>(o->num_speculative_rounds);
  return {{"num_rounds", o->num_speculative_rounds},
          {"num_draft_tokens", o->num_draft_tokens},
          {"num_accepted_tokens", o->num_accepted_tokens},
          {"acceptance", o->num_draft_tokens > 0 ? static_cast<double>(o->num_accepted_tokens) /
                                                       static_cast<double>(o->num_draft_tokens)
                                                 : 0.0},
          {"tokens_per_round", 1.0 + static_cast<double>(o->num_accepted_tokens) / rounds}};
}

// A request's latencies in ms (tpot null below two tokens).
struct Latencies {
  double ttft_ms, tpot_ms, e2e_ms;
  bool has_tpot;
};

// Time per output token after the first, in seconds (needs two tokens).
double TpotSeconds(const RequestRecord& r) {
  return (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

Latencies LatenciesOf(const RequestRecord& r) {
  const bool has_tpot = r.output_tokens > 1;
  return {r.ttft_s * 1e3, has_tpot ? TpotSeconds(r) * 1e3 : 0.0, r.e2e_s * 1e3, has_tpot};
}

// Requests that completed and met every SLO; null without SLOs.
json GoodputJson(const std::vector<LatencySlo>& slos, const std::vector<RequestRecord>& records,
                 double duration_s) {
  if (slos.empty()) return nullptr;
  int64_t good = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) continue;
    const Latencies l = LatenciesOf(r);
    bool meets = true;
    for (const LatencySlo& s : slos) {
      const double v = s.metric == "ttft" ? l.ttft_ms : s.metric == "tpot" ? l.tpot_ms : l.e2e_ms;
      meets &= v <= s.ms;
    }
    good += meets;
  }
  json targets = json::object();
  for (const LatencySlo& s : slos) targets[s.metric + "_ms"] = s.ms;
  return {{"slos", targets},
          {"num_good", good},
          {"requests_per_s", static_cast<double>(good) / duration_s},
          {"fraction", records.empty() ? 0.0 : static_cast<double>(good) / records.size()}};
}

json RequestsJson(const std::vector<RequestRecord>& records) {
  json out = json::array();
  for (const RequestRecord& r : records) {
    const Latencies l = LatenciesOf(r);
    out.push_back({{"ok", r.ok},
                   {"output_tokens", r.output_tokens},
                   {"ttft_ms", l.ttft_ms},
                   {"tpot_ms", l.has_tpot ? json(l.tpot_ms) : json(nullptr)},
                   {"e2e_ms", l.e2e_ms}});
  }
  return out;
}

json SummaryJson(const LatencySummary& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

LatencySummary ToMs(std::vector<double> seconds) {
  for (double& v : seconds) v *= 1000.0;
  return Summarize(std::move(seconds));
}

json Report(const BenchOptions& o, const std::vector<RequestRecord>& records, double duration_s,
            const std::optional<StepOverhead>& overhead) {
  int64_t failed = 0, input_tokens = 0, output_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++failed;
      continue;
    }
    input_tokens += r.input_tokens;
    output_tokens += r.output_tokens;
    e2e.push_back(r.e2e_s);
    if (r.output_tokens > 0) ttft.push_back(r.ttft_s);
    if (r.output_tokens > 1) tpot.push_back(TpotSeconds(r));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  const int64_t completed = static_cast<int64_t>(records.size()) - failed;
  const double d = duration_s > 0 ? duration_s : 1e-9;
  json j;
  j["num_requests"] = records.size();
  j["num_completed"] = completed;
  j["num_failed"] = failed;
  j["duration_s"] = duration_s;
  j["request_throughput"] = static_cast<double>(completed) / d;
  j["output_tokens_per_s"] = static_cast<double>(output_tokens) / d;
  j["input_tokens"] = input_tokens;
  j["output_tokens"] = output_tokens;
  j["ttft_ms"] = SummaryJson(ToMs(ttft));
  j["tpot_ms"] = SummaryJson(ToMs(tpot));
  j["itl_ms"] = SummaryJson(ToMs(itl));
  j["e2e_ms"] = SummaryJson(ToMs(e2e));
  j["step_overhead"] = StepOverheadJson(overhead);
  j["speculation"] = SpeculationJson(overhead);
  j["goodput"] = GoodputJson(o.goodput, records, d);
  j["requests"] = RequestsJson(records);
  j["options"] = {{"backend", o.backend},
                  {"url", o.url},
                  {"model", o.model},
                  {"addr", o.addr},
                  {"concurrency", o.concurrency},
                  {"request_rate", o.request_rate},
                  {"num_requests", o.num_requests},
                  {"input_len", o.input_len},
                  {"output_len", o.output_len},
                  {"dataset", o.dataset},
                  {"shared_prefix_len", o.shared_prefix_len},
                  {"seed", o.seed},
                  {"timeout_s", o.timeout_s}};
  return j;
}

void PrintTable(const json& r) {
  std::printf("============ tandem bench ============\n");
  std::printf("%-32s %lld / %lld\n", "Requests (completed / failed):",
              r["num_completed"].get<long long>(), r["num_failed"].get<long long>());
  std::printf("%-32s %.3f\n", "Duration (s):", r["duration_s"].get<double>());
  std::printf("%-32s %lld\n", "Input tokens:", r["input_tokens"].get<long long>());
  std::printf("%-32s %lld\n", "Output tokens:", r["output_tokens"].get<long long>());
  std::printf("%-32s %.3f\n", "Request throughput (req/s):",
              r["request_throughput"].get<double>());
  std::printf("%-32s %.2f\n", "Output throughput (tok/s):",
              r["output_tokens_per_s"].get<double>());
  std::printf("%-10s %12s %12s %12s %12s\n", "(ms)", "mean", "p50", "p90", "p99");
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    const json& s = r[key];
    std::string name(key);
    name = name.substr(0, name.size() - 3);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::printf("%-10s %12.2f %12.2f %12.2f %12.2f\n", name.c_str(), s["mean"].get<double>(),
                s["p50"].get<double>(), s["p90"].get<double>(), s["p99"].get<double>());
  }
  const json& so = r["step_overhead"];
  if (so.is_null()) {
    std::printf("%-32s %s\n", "Step overhead:", "n/a (no worker-group step counters)");
  } else {
    std::printf("%-32s %lld (worker groups: %d)\n", "Steps:", so["num_steps"].get<long long>(),
                so["num_groups"].get<int>());
    std::printf("%-32s %.3f\n", "Mean step (ms):", so["mean_step_ms"].get<double>());
    std::printf("%-32s %.3f\n", "Mean worker step (ms):",
                so["mean_worker_step_ms"].get<double>());
    std::printf("%-32s %.2f %%\n", "Coordinator<->worker overhead:",
                100.0 * so["overhead_share"].get<double>());
  }
  const json& gp = r["goodput"];
  if (!gp.is_null()) {
    std::printf("%-32s %lld (%.3f req/s, %.1f %%)\n", "Goodput (requests in SLO):",
                gp["num_good"].get<long long>(), gp["requests_per_s"].get<double>(),
                100.0 * gp["fraction"].get<double>());
  }
  const json& sp = r["speculation"];
  if (!sp.is_null()) {
    std::printf("%-32s %lld rounds, %.1f %% accepted, %.2f tokens/round\n", "Speculation:",
                sp["num_rounds"].get<long long>(), 100.0 * sp["acceptance"].get<double>(),
                sp["tokens_per_round"].get<double>());
  }
  std::printf("======================================\n");
  std::fflush(stdout);
}

int Fail(const std::string& message) { return CommandFailed("bench", message); }
int Fail(const absl::Status& status) { return CommandFailed("bench", status); }

// The requests to send: from --dataset, else random prompts of the
// options' lengths over the served vocabulary (INVALID_ARGUMENT when they
// exceed the model's context length).
absl::StatusOr<std::vector<JsonRequest>> MakeRequests(const BenchOptions& o, int32_t vocab_size,
                                                      int32_t context_length) {
  if (!o.dataset.empty()) return DatasetRequests(o.dataset, o.num_requests, o.output_len);
  if (context_length > 0 && static_cast<int64_t>(o.input_len) + o.output_len > context_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--input-len %d + --output-len %d exceeds the model's context length %d", o.input_len,
        o.output_len, context_length));
  }
  return RandomRequests({.num_requests = o.num_requests,
                         .input_len = o.input_len,
                         .output_len = o.output_len,
                         .shared_prefix_len = o.shared_prefix_len,
                         .vocab_size = vocab_size,
                         .seed = o.seed});
}

// The run's share of the coordinator's step counters: their growth since
// `before` (other clients' steps in between count too). Nullopt, with a
// note on stderr, when the second ModelInfo fails: that costs only this
// part of the report.
std::optional<StepOverhead> OverheadSince(const BenchOptions& o,
                                          const tandem::ModelInfo& before) {
  absl::StatusOr<tandem::ModelInfo> after = GetModelInfo(o);
  if (!after.ok()) {
    std::fprintf(stderr, "tandem bench: ModelInfo after the run failed, no step overhead: %s\n",
                 DescribeStatus(after.status()).c_str());
    return std::nullopt;
  }
  return StepOverheadBetween(StepCounters(before), StepCounters(*after));
}

// Notes the first failed request (and how many failed) on stderr.
void ReportFirstFailure(const json& report, const std::vector<RequestRecord>& records) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].ok) {
      std::fprintf(stderr, "tandem bench: %lld of %zu requests failed; first: request %zu: %s\n",
                   report["num_failed"].get<long long>(), records.size(), i + 1,
                   records[i].error.c_str());
      return;
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<LatencySlo>> ParseGoodput(const std::vector<std::string>& items) {
  std::vector<LatencySlo> slos;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    LatencySlo slo;
    slo.metric = item.substr(0, colon);
    const bool known = slo.metric == "ttft" || slo.metric == "tpot" || slo.metric == "e2e";
    if (colon == std::string::npos || !known ||
        !absl::SimpleAtod(item.substr(colon + 1), &slo.ms) || !(slo.ms > 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--goodput item '%s' must be ttft:MS, tpot:MS or e2e:MS with MS > 0", item));
    }
    slos.push_back(slo);
  }
  return slos;
}

namespace {

// Where a run's requests go: how one is sent, the vocabulary and context
// for random prompts, and (tandem only) the step counters afterwards.
struct Backend {
  RequestRunner run;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  std::function<std::optional<StepOverhead>()> overhead;  // empty: none
};

absl::StatusOr<Backend> ConnectTandem(const BenchOptions& o) {
  absl::StatusOr<tandem::ModelInfo> info = GetModelInfo(o);
  if (!info.ok()) {
    return absl::UnavailableError(absl::StrFormat("cannot reach the coordinator at %s: %s",
                                                  o.addr, DescribeStatus(info.status())));
  }
  // No retries: the report measures what the server answered.
  std::shared_ptr<tandem::Client> client =
      NewClient(o.addr, o.timeout_s, o.tls_ca, /*retry=*/false);
  Backend b;
  b.run = [client](const JsonRequest& r) { return RunGrpcRequest(*client, r); };
  b.vocab_size = info->vocab_size;
  b.context_length = info->context_length;
  b.overhead = [before = *info, &o] { return OverheadSince(o, before); };
  return b;
}

absl::StatusOr<Backend> ConnectOpenAi(const BenchOptions& o) {
  absl::StatusOr<OpenAiTarget> target = ParseOpenAiUrl(o.url);
  if (!target.ok()) return target.status();
  target->model = o.model;
  if (const char* key = std::getenv("OPENAI_API_KEY"); key != nullptr) target->api_key = key;
  if (absl::Status s = QueryOpenAiModel(*target, kModelInfoTimeoutS); !s.ok()) return s;
  Backend b;
  b.run = [t = *target, timeout_s = o.timeout_s](const JsonRequest& r) {
    return RunOpenAiRequest(t, r, timeout_s);
  };
  b.vocab_size = o.vocab_size > 0 ? o.vocab_size : kDefaultOpenAiVocab;
  b.context_length = target->context_length;
  return b;
}

}  // namespace

int BenchCommand(const BenchOptions& o) {
  if (absl::Status s = Validate(o); !s.ok()) return Fail(s);
  // Open the report first so a bad path fails before the run, not after.
  std::ofstream out;
  if (!o.out.empty()) {
    out.open(o.out);
    if (!out) return Fail(absl::StrFormat("cannot write report file '%s'", o.out));
  }
  absl::StatusOr<Backend> backend = o.backend == "openai" ? ConnectOpenAi(o) : ConnectTandem(o);
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::vector<JsonRequest>> requests =
      MakeRequests(o, backend->vocab_size, backend->context_length);
  if (!requests.ok()) return Fail(requests.status());

  std::vector<RequestRecord> records(requests->size());
  const Clock::time_point start = Clock::now();
  if (o.concurrency > 0) {
    RunClosedLoop(backend->run, *requests, o, records);
  } else {
    RunOpenLoop(backend->run, *requests, o, records);
  }
  const double duration_s = Seconds(Clock::now() - start);

  const json report = Report(o, records, duration_s,
                             backend->overhead ? backend->overhead() : std::nullopt);
  PrintTable(report);
  ReportFirstFailure(report, records);
  if (out.is_open()) {
    out << report.dump(2) << "\n";
    out.close();
    if (!out) return Fail(absl::StrFormat("cannot write report file '%s'", o.out));
  }
  if (report["num_completed"].get<int64_t>() == 0) {
    return Fail(absl::StrFormat("all %zu requests failed", records.size()));
  }
  return 0;
}

}  // namespace tandem::client
