// DecodeGraphs: the CUDA graphs of CudaModelRunner's decode steps. A decode
// step's launch sequence (embedding, every layer, the final norm) depends on
// the batch only through its shape — the number of sequences and the decode
// attention's split-K partitions — once every other input (token ids,
// positions, KV slots, block tables, context lengths) sits in DeviceBatch's
// buffers at fixed addresses. So a shape seen a second time is captured
// into a graph on the runner's stream and later steps of that shape replay
// it: one launch instead of a few hundred, the launch overhead that bounds
// small-batch decode on a GPU.
//
// Shapes are captured lazily, on their second step (a one-off shape costs no
// capture); at most `max_graphs` are kept, later shapes run directly. Every
// graph holds the buffers' and the KV cache's addresses: Clear() them when
// those change (CudaModelRunner::ResetKvCache).
//
// Collective graphs (tensor parallelism: the body holds the group's
// all-reduces): NCCL requires every rank to capture a collective alike and
// to launch the graph made from that capture. Every rank runs the same
// steps, so the lazy decisions above agree; a capture the runtime refuses
// is then an error of the step rather than a silent direct run, which would
// leave this rank's all-reduces outside the graphs the others launch.
//
// Under emulation (kernels/cuda/emulation/graph.h) capture records the
// launches and a replay re-runs them in order on the CPU: it checks that
// replays read their inputs from device memory (a replay must equal the
// direct launch), not GPU launch overhead.
//
// Thread-safety: one Run at a time (the runner's stream).
#ifndef TANDEM_ENGINE_DEVICE_DECODE_GRAPHS_H_
#define TANDEM_ENGINE_DEVICE_DECODE_GRAPHS_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::device {

class DecodeGraphs {
 public:
  struct Shape {
    int32_t num_seqs = 0;
    int32_t num_partitions = 0;  // the decode attention's split-K partitions
    auto operator<=>(const Shape&) const = default;
  };

  explicit DecodeGraphs(int32_t max_graphs) : max_graphs_(max_graphs) {}
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Runs `enqueue` — which enqueues the step's kernels on `stream` and
  // nothing else (no synchronization, no host work depending on results) —
  // for a step of `shape`: directly the first time, captured and launched
  // the second, replayed after. Returns enqueue's error, or INTERNAL naming
  // the CUDA call that failed. A capture the runtime refuses is discarded,
  // the step runs directly, and so does that shape from then on; for
  // collective graphs the refusal is the step's error, which breaks the
  // tensor-parallel group (its ranks have diverged).
  absl::Status Run(const Shape& shape, cudaStream_t stream,
                   const std::function<absl::Status()>& enqueue);

  // Whether the captured work includes collectives (see the file comment).
  void set_collective(bool collective) { collective_ = collective; }

  // Destroys every graph and forgets the shapes seen.
  void Clear();

  int32_t num_graphs() const { return static_cast<int32_t>(graphs_.size()); }
  int64_t num_captures() const { return num_captures_; }
  int64_t num_replays() const { return num_replays_; }

 private:
  // Captures `enqueue` for `shape` into graphs_; on an error nothing is
  // kept and *enqueue_failed says whether enqueue's own error it is.
  absl::Status Capture(const Shape& shape, cudaStream_t stream,
                       const std::function<absl::Status()>& enqueue, bool* enqueue_failed);

  int32_t max_graphs_;
  bool collective_ = false;
  std::map<Shape, int32_t> seen_;            // steps run per shape without a graph
  std::map<Shape, cudaGraphExec_t> graphs_;  // instantiated, owned
  int64_t num_captures_ = 0;
  int64_t num_replays_ = 0;
};

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DECODE_GRAPHS_H_
