#include "engine/device/decode_graphs.h"

#include "absl/strings/str_format.h"

namespace tandem::device {
namespace {

// seen_ value of a shape whose capture failed: it runs directly for good.
constexpr int32_t kNeverCapture = -1;

absl::Status CudaError(const char* call, cudaError_t error) {
  return absl::InternalError(
      absl::StrFormat("CUDA graph: %s failed: %s", call, cudaGetErrorString(error)));
}

}  // namespace

DecodeGraphs::~DecodeGraphs() { Clear(); }

void DecodeGraphs::Clear() {
  for (auto& [shape, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
  graphs_.clear();
  seen_.clear();
}

absl::Status DecodeGraphs::Run(const Shape& shape, cudaStream_t stream,
                               const std::function<absl::Status()>& enqueue) {
  if (auto it = graphs_.find(shape); it != graphs_.end()) {
    ++num_replays_;
    if (cudaError_t e = cudaGraphLaunch(it->second, stream); e != cudaSuccess) {
      return CudaError("cudaGraphLaunch", e);
    }
    return absl::OkStatus();
  }
  int32_t& seen = seen_[shape];
  if (seen == kNeverCapture || seen == 0 ||
      static_cast<int32_t>(graphs_.size()) >= max_graphs_) {
    if (seen != kNeverCapture) ++seen;
    return enqueue();
  }
  // A shape that repeats: capture it, then launch what was captured. A
  // capture the runtime refused leaves the step to run directly.
  bool enqueue_failed = false;
  if (absl::Status s = Capture(shape, stream, enqueue, &enqueue_failed); !s.ok()) {
    seen = kNeverCapture;  // map references outlive insertions
    return enqueue_failed || collective_ ? s : enqueue();
  }
  ++num_captures_;
  if (cudaError_t e = cudaGraphLaunch(graphs_.at(shape), stream); e != cudaSuccess) {
    return CudaError("cudaGraphLaunch", e);
  }
  return absl::OkStatus();
}

absl::Status DecodeGraphs::Capture(const Shape& shape, cudaStream_t stream,
                                   const std::function<absl::Status()>& enqueue,
                                   bool* enqueue_failed) {
  // Thread-local mode: other ranks' threads keep their own streams and calls.
  if (cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      e != cudaSuccess) {
    return CudaError("cudaStreamBeginCapture", e);
  }
  const absl::Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok() || ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // the failed capture's error is reported here
    *enqueue_failed = !enqueued.ok();
    return enqueued.ok() ? CudaError("cudaStreamEndCapture", ended) : enqueued;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (instantiated != cudaSuccess) return CudaError("cudaGraphInstantiate", instantiated);
  graphs_[shape] = exec;
  return absl::OkStatus();
}

}  // namespace tandem::device
