// ThreadCommunicator: the Communicator between ranks that are threads of one
// process, each with its own ThreadCommunicator over one shared ThreadWorld.
// Every collective is a barrier, the exchange, and a second barrier (so no
// rank overwrites a buffer another still reads); AllReduceSum adds the
// partials in rank order, as MpiCommunicator does, so a group of threads
// computes the same bits as a group of processes. It is the in-process
// stand-in behind the device all-reduce on the emulated GPU
// (engine/device/device_communicator.h) and what tests of tensor
// parallelism run on.
//
// Thread-safety: each ThreadCommunicator is used by its rank's thread only;
// every rank must issue the same collectives in the same order (a rank that
// stops calling blocks the others, as with MPI).
#ifndef TANDEM_ENGINE_PARALLEL_THREAD_COMMUNICATOR_H_
#define TANDEM_ENGINE_PARALLEL_THREAD_COMMUNICATOR_H_

#include <barrier>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/parallel/communicator.h"

namespace tandem::parallel {

// What the ranks of one in-process group share. Outlives their communicators.
class ThreadWorld {
 public:
  explicit ThreadWorld(int world_size);
  int world_size() const { return world_size_; }

  // One communicator per rank in [0, world_size).
  std::vector<std::unique_ptr<Communicator>> MakeCommunicators();

 private:
  friend class ThreadCommunicator;
  int world_size_;
  std::barrier<> barrier_;
  std::vector<float*> buffers_;    // AllReduceSum: each rank's data
  std::vector<int64_t> counts_;    // ... and its n
  std::string* root_bytes_ = nullptr;  // Broadcast: the root's
};

class ThreadCommunicator final : public Communicator {
 public:
  // Rank `rank` of `world` (not owned).
  ThreadCommunicator(ThreadWorld* world, int rank);

  int rank() const override { return rank_; }
  int world_size() const override { return world_->world_size(); }
  // InvalidArgument when the ranks pass different n (every rank gets it).
  absl::Status AllReduceSum(float* data, int64_t n) override;
  absl::Status Broadcast(std::string* bytes, int root) override;

 private:
  ThreadWorld* world_;
  int rank_;
  std::vector<float> sum_;
};

}  // namespace tandem::parallel

#endif  // TANDEM_ENGINE_PARALLEL_THREAD_COMMUNICATOR_H_
