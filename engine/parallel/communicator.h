// Communicator: the collectives tensor parallelism needs between the ranks of
// one target worker group, behind one interface (MPI between CPU ranks here;
// NCCL between GPUs later). Rank 0 broadcasts the step plan; every rank runs
// its shard of the forward; partial outputs of attention-out and FFN-down are
// summed with AllReduceSum.
//
// Determinism contract: AllReduceSum must produce bit-identical results on
// every rank, and the same bits for the same inputs on every run. The
// implementations here sum the ranks' partials in rank order (0, 1, ...), so
// "same seed -> same tokens" holds at a given tensor-parallel size regardless
// of how the transport would have ordered a native reduction.
//
// Thread-safety: a Communicator is used by one thread per rank at a time;
// every rank must issue the same collectives in the same order.
#ifndef TANDEM_ENGINE_PARALLEL_COMMUNICATOR_H_
#define TANDEM_ENGINE_PARALLEL_COMMUNICATOR_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace tandem::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data[i] <- sum over ranks r (in rank order) of rank r's data[i], for
  // i < n, on every rank. Every rank must pass the same n.
  virtual absl::Status AllReduceSum(float* data, int64_t n) = 0;

  // Rank `root`'s *bytes replace every other rank's *bytes (any size).
  virtual absl::Status Broadcast(std::string* bytes, int root) = 0;

  // Ends every rank of the group (this process included) after printing
  // `reason`: for a failure on one rank that leaves the others waiting in a
  // collective, where no rank can recover. The default ends this process.
  [[noreturn]] virtual void Abort(std::string_view reason) {
    std::fprintf(stderr, "rank %d of %d: %.*s: aborting the group\n", rank(), world_size(),
                 static_cast<int>(reason.size()), reason.data());
    std::_Exit(1);
  }
};

// A collective over `comm`: `local` when it failed here; else
// `another_failed` when it failed on some other rank; else OK. Every rank
// learns the outcome before going on, so that a failure on one rank (no
// device, out of memory) fails them all instead of leaving the others
// waiting in the next collective. Fails as AllReduceSum.
inline absl::Status AllRanksOk(Communicator& comm, const absl::Status& local,
                               absl::Status another_failed) {
  float failed = local.ok() ? 0.0f : 1.0f;
  if (comm.world_size() > 1) {
    if (absl::Status s = comm.AllReduceSum(&failed, 1); !s.ok()) return s;
  }
  if (!local.ok()) return local;
  return failed > 0 ? another_failed : absl::OkStatus();
}

// A world of one: every collective is a no-op.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float* data, int64_t n) override {
    if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("AllReduceSum n %d < 0", n));
    return absl::OkStatus();
  }
  absl::Status Broadcast(std::string* bytes, int root) override {
    if (root != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("broadcast root %d is out of range: the world has 1 rank", root));
    }
    return absl::OkStatus();
  }
};

}  // namespace tandem::parallel

#endif  // TANDEM_ENGINE_PARALLEL_COMMUNICATOR_H_
