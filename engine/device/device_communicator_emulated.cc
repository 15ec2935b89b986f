// DeviceCommunicator under the emulator: device memory is host memory, so the
// all-reduce is the host Communicator's (rank-ordered) once the stream has
// run everything before it; inside a stream capture it is recorded into the
// graph (kernels/cuda/emulation/graph.h).
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/device/device_communicator.h"
#include "kernels/cuda/emulation/graph.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::device {

struct DeviceCommunicator::Backend {};

DeviceCommunicator::DeviceCommunicator(parallel::Communicator* host,
                                       std::unique_ptr<Backend> backend)
    : host_(host), backend_(std::move(backend)) {}

DeviceCommunicator::~DeviceCommunicator() = default;

absl::StatusOr<std::unique_ptr<DeviceCommunicator>> DeviceCommunicator::Create(
    parallel::Communicator* host) {
  return std::unique_ptr<DeviceCommunicator>(
      new DeviceCommunicator(host, std::make_unique<Backend>()));
}

bool DeviceCommunicator::capturable() const { return true; }

absl::Status DeviceCommunicator::AllReduceSum(float* data, int64_t n, cudaStream_t stream) {
  // Captured into a graph as an NCCL collective is on a GPU: the sum runs
  // at each replay, when the stream reaches it (every rank replays the same
  // collectives in the same order).
  parallel::Communicator* host = host_;
  const bool recorded = cuda_emu::RecordIfCapturing(stream, [host, data, n] {
    const absl::Status summed = host->AllReduceSum(data, n);
    if (summed.ok()) return cudaSuccess;
    TANDEM_LOG(kError, "device all-reduce in a CUDA graph: %s", summed.ToString());
    return cudaErrorLaunchFailure;
  });
  if (recorded) return absl::OkStatus();
  RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "all-reduce: stream"));
  return host_->AllReduceSum(data, n);
}

}  // namespace tandem::device
