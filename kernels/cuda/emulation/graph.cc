#include "kernels/cuda/emulation/graph.h"

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/runtime_api.h"

// A captured graph and its executable form: the recorded operations.
struct CUgraph_st {
  std::vector<tandem::cuda_emu::GraphOperation> operations;
};
struct CUgraphExec_st {
  std::vector<tandem::cuda_emu::GraphOperation> operations;
};

namespace tandem::cuda_emu {
namespace {

struct Capture {
  std::vector<tandem::cuda_emu::GraphOperation> operations;
  bool invalidated = false;
};

struct Captures {
  std::mutex mutex;
  std::map<cudaStream_t, Capture> by_stream;
};

Captures& AllCaptures() {
  static Captures* captures = new Captures();
  return *captures;
}

}  // namespace

bool RecordIfCapturing(cudaStream_t stream, GraphOperation operation) {
  if (stream == nullptr) return false;  // the legacy stream never captures
  Captures& c = AllCaptures();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_stream.find(stream);
  if (it == c.by_stream.end()) return false;
  it->second.operations.push_back(std::move(operation));
  return true;
}

cudaError_t RunOrRecord(cudaStream_t stream, const GraphOperation& operation) {
  return RecordIfCapturing(stream, operation) ? cudaSuccess : operation();
}

bool IsCapturing(cudaStream_t stream) {
  if (stream == nullptr) return false;
  Captures& c = AllCaptures();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.by_stream.count(stream) == 1;
}

void InvalidateCapture(cudaStream_t stream) {
  Captures& c = AllCaptures();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_stream.find(stream);
  if (it != c.by_stream.end()) it->second.invalidated = true;
}

}  // namespace tandem::cuda_emu

using tandem::cuda_emu::AllCaptures;
using tandem::cuda_emu::RecordError;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (stream == nullptr) return RecordError(cudaErrorStreamCaptureUnsupported);
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return RecordError(cudaErrorInvalidValue);
  }
  auto& c = AllCaptures();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.by_stream.emplace(stream, tandem::cuda_emu::Capture{}).second) {
    return RecordError(cudaErrorIllegalState);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return RecordError(cudaErrorInvalidValue);
  tandem::cuda_emu::Capture capture;
  {
    auto& c = AllCaptures();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.by_stream.find(stream);
    if (stream == nullptr || it == c.by_stream.end()) return RecordError(cudaErrorIllegalState);
    capture = std::move(it->second);
    c.by_stream.erase(it);
  }
  *graph = nullptr;
  if (capture.invalidated) return RecordError(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{std::move(capture.operations)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return RecordError(cudaErrorInvalidValue);
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  *status = tandem::cuda_emu::IsCapturing(stream) ? cudaStreamCaptureStatusActive
                                                  : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  if (exec == nullptr || graph == nullptr) return RecordError(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->operations};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return RecordError(cudaErrorInvalidValue);
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  if (tandem::cuda_emu::IsCapturing(stream)) {
    // A graph launched into a capture would become a child graph: unused.
    tandem::cuda_emu::InvalidateCapture(stream);
    return RecordError(cudaErrorStreamCaptureUnsupported);
  }
  namespace counters = tandem::cuda_emu::counters_internal;
  counters::OnGraphLaunch(static_cast<int64_t>(exec->operations.size()));
  counters::SetReplayingGraph(true);
  cudaError_t status = cudaSuccess;
  for (const tandem::cuda_emu::GraphOperation& operation : exec->operations) {
    status = operation();
    if (status != cudaSuccess) break;
  }
  counters::SetReplayingGraph(false);
  return RecordError(status);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec == nullptr) return RecordError(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return RecordError(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}
