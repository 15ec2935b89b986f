// BenchGroup: one tensor-parallel group of CudaModelRunners inside this
// process, a thread per rank joined by ThreadCommunicator (NCCL between the
// GPUs in a real-GPU build, rank r on device r), and the timed prefill and
// greedy decode of a batch of synthetic requests through it — the engine as
// tandem-worker runs it, without the scheduler and RPCs. Rank 0 computes the
// logits, copies them to the host and takes each row's argmax on the model's
// thread pool (tandem samples on the host, rows spread over the pool), then
// broadcasts the tokens to the other ranks.
//
// Thread-safety: one thread calls Run at a time.
#ifndef TANDEM_BENCH_GPU_BENCH_BENCH_GROUP_H_
#define TANDEM_BENCH_GPU_BENCH_BENCH_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/device/cuda_model_runner.h"
#include "engine/model/model.h"
#include "engine/parallel/thread_communicator.h"

namespace tandem::bench {

// One measured batch: num_seqs requests of input_len prompt tokens, each
// generating output_len tokens (the first from the prefill's logits).
struct RunShape {
  int32_t num_seqs = 1;
  int32_t input_len = 512;
  int32_t output_len = 256;
};

struct RunTimes {
  double prefill_s = 0;  // every prompt through the model, first tokens chosen
  double decode_s = 0;   // the output_len - 1 decode steps
  // Of decode_s on rank 0: inside ModelRunner::Forward (the layers, the head
  // and the logits' copy to the host), and choosing tokens on the host.
  double decode_forward_s = 0;
  double decode_sample_s = 0;
  // One decode step of the layers alone (no head, no logits), measured
  // after the run: decode_forward_s / steps minus this is the head and the
  // logits' copy.
  double layers_step_s = 0;
};

class BenchGroup {
 public:
  // Loads `model_path` as `tp` shards and a runner per shard with `options`
  // (max_batched_tokens bounds every forward). A rank that fails to load
  // ends the process with its error: the others would wait in a collective.
  static absl::StatusOr<std::unique_ptr<BenchGroup>> Load(const std::string& model_path, int tp,
                                                          const device::CudaOptions& options);
  ~BenchGroup();

  // Runs `shape` once from an empty KV cache. ResourceExhausted (on every
  // rank alike) when the cache for it does not fit.
  absl::StatusOr<RunTimes> Run(const RunShape& shape);

  int tp() const { return world_.world_size(); }
  const model::ModelConfig& config() const { return models_[0]->config(); }
  const char* device_name() const { return runners_[0]->device_name(); }
  // Weight bytes one decode step reads on all ranks together (every matrix
  // and the output head; of the embedding table one row, so not counted).
  int64_t weight_bytes_per_step() const;
  // KV cache bytes one token occupies on all ranks together.
  int64_t kv_bytes_per_token() const;

 private:
  explicit BenchGroup(int tp) : world_(tp), comms_(world_.MakeCommunicators()) {}
  absl::Status RunRank(int rank, const RunShape& shape, RunTimes* times);

  parallel::ThreadWorld world_;
  std::vector<std::unique_ptr<parallel::Communicator>> comms_;
  std::vector<std::unique_ptr<model::Model>> models_;
  std::vector<std::unique_ptr<device::CudaModelRunner>> runners_;
  int32_t max_batched_tokens_ = 0;
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_BENCH_BENCH_GROUP_H_
