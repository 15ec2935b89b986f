#include "coordinator/http/serving_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace tandem::coordinator::http {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// vLLM's buckets, so dashboards built for it read the same.
const Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const Histogram::BucketBoundaries kTpotBuckets = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const Histogram::BucketBoundaries kLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

const char* FinishedReasonLabel(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

}  // namespace

ServingMetrics::ServingMetrics(std::string model_name, int32_t block_size,
                               const WorkerGroupPool* pool, const DraftWorkerSet* drafts)
    : model_name_(std::move(model_name)),
      block_size_(block_size),
      pool_(pool),
      drafts_(drafts),
      registry_(std::make_shared<prometheus::Registry>()) {
  RegisterVllmMetrics(*registry_);
  RegisterTandemMetrics(*registry_);
}

void ServingMetrics::RegisterVllmMetrics(prometheus::Registry& r) {
  running_ = &BuildGauge().Name("vllm:num_requests_running")
                  .Help("Requests in the running batch").Register(r);
  waiting_ = &BuildGauge().Name("vllm:num_requests_waiting")
                  .Help("Requests waiting to be scheduled").Register(r);
  kv_usage_ = &BuildGauge().Name("vllm:kv_cache_usage_perc")
                   .Help("KV cache usage: 1 means every block is used").Register(r);
  cache_config_ = &BuildGauge().Name("vllm:cache_config_info")
                       .Help("KV cache configuration").Register(r);
  prompt_tokens_ = &BuildCounter().Name("vllm:prompt_tokens_total")
                        .Help("Prompt tokens of finished requests").Register(r);
  generation_tokens_ = &BuildCounter().Name("vllm:generation_tokens_total")
                            .Help("Generated tokens of finished requests").Register(r);
  request_success_ = &BuildCounter().Name("vllm:request_success_total")
                          .Help("Finished requests by finish reason").Register(r);
  preemptions_ = &BuildCounter().Name("vllm:num_preemptions_total")
                      .Help("Sequences preempted (KV blocks ran out)").Register(r);
  prefix_queries_ = &BuildCounter().Name("vllm:prefix_cache_queries_total")
                         .Help("Prompt tokens looked up in the prefix cache").Register(r);
  prefix_hits_ = &BuildCounter().Name("vllm:prefix_cache_hits_total")
                      .Help("Prompt tokens served from the prefix cache").Register(r);
  spec_drafts_ = &BuildCounter().Name("vllm:spec_decode_num_drafts_total")
                      .Help("Speculative rounds (a sequence verified drafts)").Register(r);
  spec_draft_tokens_ = &BuildCounter().Name("vllm:spec_decode_num_draft_tokens_total")
                            .Help("Draft tokens verified").Register(r);
  spec_accepted_tokens_ = &BuildCounter().Name("vllm:spec_decode_num_accepted_tokens_total")
                               .Help("Draft tokens accepted").Register(r);
  spec_accepted_per_position_ =
      &BuildCounter().Name("vllm:spec_decode_num_accepted_tokens_per_pos_total")
           .Help("Rounds whose draft at `position` (from 0) was accepted").Register(r);
  ttft_ = &BuildHistogram().Name("vllm:time_to_first_token_seconds")
               .Help("Time to first token").Register(r);
  tpot_ = &BuildHistogram().Name("vllm:time_per_output_token_seconds")
               .Help("Mean time per output token after the first, per request").Register(r);
  e2e_ = &BuildHistogram().Name("vllm:e2e_request_latency_seconds")
              .Help("Request latency, arrival to finish").Register(r);
  queue_time_ = &BuildHistogram().Name("vllm:request_queue_time_seconds")
                     .Help("Time from arrival to first scheduling").Register(r);
}

void ServingMetrics::RegisterTandemMetrics(prometheus::Registry& r) {
  group_healthy_ = &BuildGauge().Name("tandem:worker_group_healthy")
                        .Help("1 while the worker group serves, 0 while it is lost").Register(r);
  group_load_ = &BuildGauge().Name("tandem:worker_group_load")
                     .Help("Requests in flight on the worker group").Register(r);
  group_overhead_ = &BuildGauge().Name("tandem:worker_group_step_overhead_ratio")
                         .Help("Share of the step time spent outside the worker group").Register(r);
  group_blocks_used_ = &BuildGauge().Name("tandem:worker_group_kv_blocks_used")
                            .Help("KV blocks referenced by sequences").Register(r);
  drafts_healthy_ = &BuildGauge().Name("tandem:draft_workers_healthy")
                         .Help("Draft workers answering").Register(r);
  beam_forks_ = &BuildCounter().Name("tandem:beam_forks_total")
                     .Help("Beam sequences forked from another beam").Register(r);
  block_copies_ = &BuildCounter().Name("tandem:kv_block_copies_total")
                       .Help("Copy-on-write KV block copies").Register(r);
  migrations_ = &BuildCounter().Name("tandem:request_migrations_total")
                     .Help("Requests moved to a healthy worker group after theirs failed")
                     .Register(r);
  migration_failures_ =
      &BuildCounter().Name("tandem:request_migration_failures_total")
           .Help("Requests whose group failed and that no healthy group took in time")
           .Register(r);
}

prometheus::Labels ServingMetrics::With(prometheus::Labels extra) const {
  extra.emplace("model_name", model_name_);
  return extra;
}

void ServingMetrics::OnFinished(const RequestOutput& output) {
  const prometheus::Labels labels = With({});
  const double prompt = static_cast<double>(output.prompt_token_ids.size());
  prompt_tokens_->Add(labels).Increment(prompt);
  prefix_queries_->Add(labels).Increment(prompt);
  prefix_hits_->Add(labels).Increment(static_cast<double>(output.prefix_hit_tokens));
  int64_t generated = 0;
  for (const Completion& c : output.completions) {
    generated += static_cast<int64_t>(c.token_ids.size());
  }
  generation_tokens_->Add(labels).Increment(static_cast<double>(generated));
  const FinishReason reason =
      output.completions.empty() ? FinishReason::kError : output.completions[0].finish_reason;
  request_success_->Add(With({{"finished_reason", FinishedReasonLabel(reason)}})).Increment();
  spec_drafts_->Add(labels).Increment(static_cast<double>(output.num_speculative_rounds));
  spec_draft_tokens_->Add(labels).Increment(static_cast<double>(output.num_draft_tokens));
  spec_accepted_tokens_->Add(labels).Increment(static_cast<double>(output.num_accepted_tokens));
  for (size_t i = 0; i < output.num_accepted_per_position.size(); ++i) {
    spec_accepted_per_position_->Add(With({{"position", absl::StrCat(i)}}))
        .Increment(static_cast<double>(output.num_accepted_per_position[i]));
  }
  if (!output.status.ok() || generated == 0) return;
  ttft_->Add(labels, kTtftBuckets).Observe(output.time_to_first_token_ms / 1e3);
  e2e_->Add(labels, kLatencyBuckets).Observe(output.latency_ms / 1e3);
  queue_time_->Add(labels, kLatencyBuckets).Observe(output.queue_ms / 1e3);
  const size_t first_len = output.completions[0].token_ids.size();
  if (first_len > 1) {
    tpot_->Add(labels, kTpotBuckets)
        .Observe((output.latency_ms - output.time_to_first_token_ms) / 1e3 /
                 static_cast<double>(first_len - 1));
  }
}

void ServingMetrics::CountGroupDeltas(const GroupCounters& now, const GroupCounters& before) {
  // A reconnected group starts its counters again: count from there.
  auto delta = [](int64_t n, int64_t b) { return static_cast<double>(n >= b ? n - b : n); };
  const prometheus::Labels labels = With({});
  preemptions_->Add(labels).Increment(delta(now.preemptions, before.preemptions));
  block_copies_->Add(labels).Increment(delta(now.block_copies, before.block_copies));
  beam_forks_->Add(labels).Increment(delta(now.beam_forks, before.beam_forks));
  migrations_->Add(labels).Increment(delta(now.migrations, before.migrations));
  migration_failures_->Add(labels).Increment(
      delta(now.migration_failures, before.migration_failures));
}

void ServingMetrics::UpdateGauges() {
  int64_t running = 0, waiting = 0, used = 0, total = 0;
  absl::flat_hash_map<std::string, GroupCounters> seen;
  for (const WorkerGroupStatusSnapshot& g : pool_->Statuses()) {
    running += g.stats.num_requests_running;
    waiting += g.stats.num_requests_waiting;
    used += g.stats.kv.num_blocks_used;
    total += g.stats.kv.num_blocks_total;
    const prometheus::Labels group = With({{"worker_group", g.name}});
    group_healthy_->Add(group).Set(g.healthy ? 1 : 0);
    group_load_->Add(group).Set(static_cast<double>(g.load));
    group_blocks_used_->Add(group).Set(g.stats.kv.num_blocks_used);
    const double step = g.stats.scheduler.step_ms;
    group_overhead_->Add(group).Set(step > 0 ? (step - g.stats.scheduler.worker_step_ms) / step
                                             : 0.0);
    const SchedulerStats& st = g.stats.scheduler;
    const GroupCounters now{st.num_preemptions, st.num_block_copies, st.num_beam_forks,
                            g.stats.num_migrations, g.stats.num_migration_failures};
    auto before = groups_seen_.find(g.name);
    CountGroupDeltas(now, before != groups_seen_.end() ? before->second : GroupCounters{});
    seen[g.name] = now;
  }
  for (const auto& [name, counters] : groups_seen_) {
    if (seen.contains(name)) continue;
    const prometheus::Labels group = With({{"worker_group", name}});
    for (auto* family : {group_healthy_, group_load_, group_blocks_used_, group_overhead_}) {
      family->Remove(&family->Add(group));
    }
  }
  groups_seen_ = std::move(seen);
  const prometheus::Labels labels = With({});
  running_->Add(labels).Set(static_cast<double>(running));
  waiting_->Add(labels).Set(static_cast<double>(waiting));
  kv_usage_->Add(labels).Set(total > 0 ? static_cast<double>(used) / total : 0.0);
  cache_config_->Add(With({{"block_size", absl::StrCat(block_size_)},
                           {"num_gpu_blocks", absl::StrCat(total)}}))
      .Set(1);
  int64_t healthy_drafts = 0;
  if (drafts_ != nullptr) {
    for (const DraftWorkerStatusSnapshot& d : drafts_->Statuses()) healthy_drafts += d.healthy;
  }
  drafts_healthy_->Add(labels).Set(static_cast<double>(healthy_drafts));
}

std::string ServingMetrics::Render() {
  absl::MutexLock lock(&scrape_mutex_);
  UpdateGauges();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tandem::coordinator::http
