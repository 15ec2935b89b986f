// DeviceCommunicator under the emulator: device memory is host memory, so the
// all-reduce is the host Communicator's (rank-ordered) once the stream has
// run everything before it.
#include "common/status_macros.h"
#include "engine/device/device_communicator.h"
#include "kernels/cuda/cuda_error.cuh"

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

absl::Status DeviceCommunicator::AllReduceSum(float* data, int64_t n, cudaStream_t stream) {
  RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "all-reduce: stream"));
  return host_->AllReduceSum(data, n);
}

}  // namespace tandem::device
