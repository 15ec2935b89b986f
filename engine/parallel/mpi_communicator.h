// MpiCommunicator: the Communicator over an MPI communicator (MPI_COMM_WORLD
// by default): one rank per process of a target worker group.
//
// AllReduceSum does not use MPI_Allreduce: the order in which MPI_SUM adds
// the ranks' contributions is implementation- and topology-dependent, which
// would break "same seed -> same tokens" across runs. Instead every rank
// gathers all partials (MPI_Allgather) and adds them in rank order itself.
// The payloads are small (hidden_dim x tokens floats per call), so the extra
// traffic (world_size x n instead of ~2n) is cheap next to the matmuls.
//
// Thread-safety: one thread per process uses it (MPI_THREAD_FUNNELED is
// enough). MPI must be initialized before construction and finalized after
// destruction (MpiSession does both).
#ifndef TANDEM_ENGINE_PARALLEL_MPI_COMMUNICATOR_H_
#define TANDEM_ENGINE_PARALLEL_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/parallel/communicator.h"

namespace tandem::parallel {

// Initializes MPI on construction (if not yet) and finalizes it on
// destruction (if this object initialized it). One per process, in main.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm` (not owned, must outlive this object).
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  absl::Status AllReduceSum(float* data, int64_t n) override;
  absl::Status Broadcast(std::string* bytes, int root) override;
  // MPI_Abort: the launcher ends every rank.
  [[noreturn]] void Abort(std::string_view reason) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int world_size_ = 1;
  std::vector<float> gathered_;  // [world_size, chunk] scratch
};

}  // namespace tandem::parallel

#endif  // TANDEM_ENGINE_PARALLEL_MPI_COMMUNICATOR_H_
