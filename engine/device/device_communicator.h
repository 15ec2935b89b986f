// DeviceCommunicator: the all-reduce of tensor parallelism on the GPU. The
// partial outputs of attention-out and FFN-down, in device memory, are summed
// across the ranks of a worker group on the runner's stream, and every rank
// continues with the same sum.
//
// On GPUs it is NCCL: rank 0 creates the NCCL unique id and broadcasts it
// over the group's host Communicator (MPI in tandem-worker); every rank then
// joins with ncclCommInitRank on the device it selected before. Under the
// emulator (device memory is host memory) the stand-in synchronizes the
// stream (or, inside a stream capture, records itself into the graph) and
// calls the host Communicator itself — MpiCommunicator between
// processes, ThreadCommunicator between in-process ranks (one thread per
// rank, a barrier per collective) — which adds the partials in rank order.
//
// Determinism: NCCL's reduction order (rings, trees) is not rank order, and
// NCCL picks its algorithm and chunking from the message size (tokens in the
// step × hidden), so on GPUs a token's sums may differ in the last bits with
// the batch it runs in: "same seed -> same tokens at any batch composition"
// holds for GPU tensor parallelism only up to such near-ties (every rank
// still gets the same bits, and a run repeats). Under emulation the sums are
// in rank order, exactly as on the CPU.
//
// Thread-safety: used by one thread per rank, the one running the forward.
#ifndef TANDEM_ENGINE_DEVICE_DEVICE_COMMUNICATOR_H_
#define TANDEM_ENGINE_DEVICE_DEVICE_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/parallel/communicator.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::device {

class DeviceCommunicator {
 public:
  // A collective over `host` (not owned, outlives the result): every rank
  // calls it at the same time, after selecting its device. INTERNAL naming
  // the NCCL call when joining fails.
  static absl::StatusOr<std::unique_ptr<DeviceCommunicator>> Create(parallel::Communicator* host);
  ~DeviceCommunicator();
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  int rank() const { return host_->rank(); }
  int world_size() const { return host_->world_size(); }

  // data[i] <- the sum over ranks of their data[i], i < n; `data` is device
  // memory, the reduction is ordered on `stream`. Every rank passes the same
  // n. INTERNAL naming the call on failure.
  absl::Status AllReduceSum(float* data, int64_t n, cudaStream_t stream);

  // Whether AllReduceSum may be captured into a CUDA graph: the loaded NCCL
  // is 2.9 or later (ncclGetVersion); always under emulation.
  bool capturable() const;

 private:
  struct Backend;  // NCCL's communicator, or nothing under emulation
  DeviceCommunicator(parallel::Communicator* host, std::unique_ptr<Backend> backend);

  parallel::Communicator* host_;
  std::unique_ptr<Backend> backend_;
};

// The device ordinal rank `local_rank` of a node uses: gpus[local_rank] when
// `gpus` (e.g. --gpus 2,3) lists any, else 0 when the process sees one device
// (CUDA_VISIBLE_DEVICES set per rank), else local_rank; InvalidArgument
// naming both when it is not below `device_count` or `gpus` is too short.
absl::StatusOr<int> DeviceOrdinalFor(const std::vector<int>& gpus, int local_rank,
                                     int device_count);

// This process's rank among the group's processes on its node: Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK (or PMIx's PMIX_LOCAL_RANK / MPI_LOCALRANKID)
// when set, else `fallback`.
int LocalRank(int fallback);

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DEVICE_COMMUNICATOR_H_
