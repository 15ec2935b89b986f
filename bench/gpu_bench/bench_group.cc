#include "bench/gpu_bench/bench_group.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace tandem::bench {
namespace {

constexpr int32_t kBlockSize = 16;
// Decode steps run after the measured ones without the output head (no
// logits, no token choice): what the layers alone cost per step.
constexpr int32_t kLayerOnlySteps = 8;
using Clock = std::chrono::steady_clock;

// One synthetic request as it runs.
struct Seq {
  std::vector<int32_t> prompt;
  std::vector<BlockId> table;
  int32_t len = 0;   // tokens in the KV cache
  int32_t next = 0;  // the token the next step computes
};

std::vector<Seq> MakeSeqs(const RunShape& shape, int32_t vocab) {
  const int32_t blocks_per_seq =
      (shape.input_len + shape.output_len + kLayerOnlySteps + kBlockSize - 1) / kBlockSize;
  std::vector<Seq> seqs(shape.num_seqs);
  for (int32_t s = 0; s < shape.num_seqs; ++s) {
    for (int32_t i = 0; i < shape.input_len; ++i) {
      seqs[s].prompt.push_back(100 + static_cast<int32_t>((s * 7919LL + i * 104729LL) % (vocab - 100)));
    }
    for (int32_t b = 0; b < blocks_per_seq; ++b) seqs[s].table.push_back(BlockId(s * blocks_per_seq + b));
  }
  return seqs;
}

// Rank 0 takes each logits row's argmax, rows spread over `pool` as
// tandem-worker's sampler spreads them; every rank gets the tokens.
absl::Status ChooseNext(parallel::Communicator& comm, ThreadPool* pool, const float* logits,
                        int32_t vocab, std::span<Seq> seqs) {
  std::string bytes(seqs.size() * sizeof(int32_t), '\0');
  if (comm.rank() == 0) {
    pool->ParallelFor(static_cast<int64_t>(seqs.size()), 1, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = logits + i * vocab;
        const int32_t token = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
        std::memcpy(bytes.data() + i * sizeof(int32_t), &token, sizeof(int32_t));
      }
    });
  }
  if (comm.world_size() > 1) RETURN_IF_ERROR(comm.Broadcast(&bytes, 0));
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::memcpy(&seqs[i].next, bytes.data() + i * sizeof(int32_t), sizeof(int32_t));
  }
  return absl::OkStatus();
}

// One forward over `seqs`, each computing `prompt` (prefill) or `next`;
// adds the forward's and the token choice's seconds to `times` (if any).
absl::Status Step(device::CudaModelRunner& runner, parallel::Communicator& comm,
                  std::span<Seq> seqs, bool prefill, std::vector<float>& logits,
                  RunTimes* times) {
  std::vector<model::ForwardSequence> batch;
  for (Seq& s : seqs) {
    std::span<const int32_t> tokens = prefill ? std::span<const int32_t>(s.prompt)
                                              : std::span<const int32_t>(&s.next, 1);
    batch.push_back({tokens, s.len, s.table, 1});
  }
  const int32_t vocab = runner.model().config().vocab_size;
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(runner.Forward(batch, comm.rank() == 0 ? logits.data() : nullptr));
  const Clock::time_point forwarded = Clock::now();
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].len += static_cast<int32_t>(batch[i].tokens.size());
  RETURN_IF_ERROR(ChooseNext(comm, runner.model().pool(), logits.data(), vocab, seqs));
  if (times != nullptr) {
    times->decode_forward_s += std::chrono::duration<double>(forwarded - start).count();
    times->decode_sample_s += std::chrono::duration<double>(Clock::now() - forwarded).count();
  }
  return absl::OkStatus();
}

// kLayerOnlySteps decode steps on every rank with no logits wanted.
absl::Status LayersOnly(device::CudaModelRunner& runner, std::span<Seq> seqs) {
  for (int32_t step = 0; step < kLayerOnlySteps; ++step) {
    std::vector<model::ForwardSequence> batch;
    for (Seq& s : seqs) batch.push_back({std::span<const int32_t>(&s.next, 1), s.len, s.table, 0});
    RETURN_IF_ERROR(runner.Forward(batch, nullptr));
    for (Seq& s : seqs) ++s.len;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BenchGroup>> BenchGroup::Load(const std::string& model_path, int tp,
                                                             const device::CudaOptions& options) {
  std::unique_ptr<BenchGroup> group(new BenchGroup(tp));
  group->models_.resize(tp);
  group->runners_.resize(tp);
  group->max_batched_tokens_ = options.max_batched_tokens;
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      absl::Status status = [&]() -> absl::Status {
        model::ModelOptions mo;
        mo.cpu_weights = false;
        mo.tp_rank = r;
        mo.tp_world_size = tp;
        mo.communicator = tp > 1 ? group->comms_[r].get() : nullptr;
        ASSIGN_OR_RETURN(group->models_[r], model::Model::Load(model_path, mo));
        ASSIGN_OR_RETURN(group->runners_[r],
                         device::CudaModelRunner::Create(group->models_[r].get(), options));
        return absl::OkStatus();
      }();
      if (!status.ok()) {
        std::fprintf(stderr, "tandem-gpu-bench: TP %d rank %d: %s\n", tp, r, status.ToString().c_str());
        std::_Exit(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return group;
}

BenchGroup::~BenchGroup() {
  runners_.clear();  // before the models they run
}

int64_t BenchGroup::weight_bytes_per_step() const {
  int64_t bytes = 0;
  for (const auto& runner : runners_) {
    const device::DeviceWeights& w = runner->weights();
    bytes += w.total_bytes;
    // An untied head has its own buffer: the embedding table is read a row at a time.
    if (w.output.buffer.bytes() > 0) bytes -= w.token_embd.buffer.bytes();
  }
  return bytes;
}

int64_t BenchGroup::kv_bytes_per_token() const {
  int64_t bytes = 0;
  for (const auto& m : models_) {
    const int64_t dtype = m->kv_dtype() == kernels::KvDtype::kF32 ? 4 : 2;
    bytes += 2 * int64_t{m->config().num_layers} * m->num_local_kv_heads() * m->config().head_dim * dtype;
  }
  return bytes;
}

absl::Status BenchGroup::RunRank(int rank, const RunShape& shape, RunTimes* times) {
  device::CudaModelRunner& runner = *runners_[rank];
  parallel::Communicator& comm = *comms_[rank];
  const int32_t vocab = config().vocab_size;
  std::vector<Seq> seqs = MakeSeqs(shape, vocab);
  const int32_t blocks = shape.num_seqs * static_cast<int32_t>(seqs[0].table.size());
  // Every rank skips a shape that does not fit on one of them.
  RETURN_IF_ERROR(parallel::AllRanksOk(
      comm, runner.ResetKvCache(blocks, kBlockSize),
      absl::ResourceExhaustedError("another rank of the group failed the same step")));
  const int32_t per_forward = std::max(1, max_batched_tokens_ / shape.input_len);
  std::vector<float> logits(rank == 0 ? static_cast<size_t>(std::max(per_forward, shape.num_seqs)) * vocab : 0);
  const Clock::time_point start = Clock::now();
  for (int32_t i = 0; i < shape.num_seqs; i += per_forward) {
    const int32_t n = std::min(per_forward, shape.num_seqs - i);
    RETURN_IF_ERROR(
        Step(runner, comm, std::span<Seq>(seqs).subspan(i, n), true, logits, nullptr));
  }
  const Clock::time_point prefilled = Clock::now();
  for (int32_t step = 1; step < shape.output_len; ++step) {
    RETURN_IF_ERROR(Step(runner, comm, seqs, false, logits, times));
  }
  const Clock::time_point decoded = Clock::now();
  RETURN_IF_ERROR(LayersOnly(runner, seqs));
  if (times != nullptr) {
    times->prefill_s = std::chrono::duration<double>(prefilled - start).count();
    times->decode_s = std::chrono::duration<double>(decoded - prefilled).count();
    times->layers_step_s =
        std::chrono::duration<double>(Clock::now() - decoded).count() / kLayerOnlySteps;
  }
  return absl::OkStatus();
}

absl::StatusOr<RunTimes> BenchGroup::Run(const RunShape& shape) {
  if (shape.num_seqs < 1 || shape.input_len < 1 || shape.output_len < 1 ||
      shape.input_len > max_batched_tokens_ || shape.num_seqs > max_batched_tokens_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences of %d prompt and %d output tokens: each count must be >= 1, and the "
        "prompt and the batch at most --max-batched-tokens %d",
        shape.num_seqs, shape.input_len, shape.output_len, max_batched_tokens_));
  }
  RunTimes times;
  std::vector<absl::Status> status(tp());
  std::vector<std::thread> threads;
  for (int r = 0; r < tp(); ++r) {
    threads.emplace_back([&, r] { status[r] = RunRank(r, shape, r == 0 ? &times : nullptr); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return times;
}

}  // namespace tandem::bench
