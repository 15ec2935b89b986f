#include "engine/parallel/mpi_communicator.h"

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <climits>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::parallel {
namespace {

absl::Status MpiError(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrFormat("%s failed: %s", what, std::string(text, len)));
}

// MPI counts are int; larger payloads go in chunks of this many floats.
constexpr int64_t kMaxChunk = 1 << 24;

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
  }
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  // Errors come back as codes (turned into Status) instead of aborting.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_size_);
}

absl::Status MpiCommunicator::AllReduceSum(float* data, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("AllReduceSum n %d < 0", n));
  if (world_size_ == 1) return absl::OkStatus();
  for (int64_t begin = 0; begin < n; begin += kMaxChunk) {
    const int64_t len = std::min(kMaxChunk, n - begin);
    gathered_.resize(static_cast<size_t>(len * world_size_));
    int rc = MPI_Allgather(data + begin, static_cast<int>(len), MPI_FLOAT, gathered_.data(),
                           static_cast<int>(len), MPI_FLOAT, comm_);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Allgather", rc);
    // Rank order, starting from rank 0's partial: identical bits on every rank.
    float* out = data + begin;
    std::copy_n(gathered_.data(), len, out);
    for (int r = 1; r < world_size_; ++r) {
      const float* part = gathered_.data() + r * len;
      for (int64_t i = 0; i < len; ++i) out[i] += part[i];
    }
  }
  return absl::OkStatus();
}

absl::Status MpiCommunicator::Broadcast(std::string* bytes, int root) {
  CHECK(bytes != nullptr);
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "broadcast root %d is out of range: the world has %d ranks", root, world_size_));
  }
  if (world_size_ == 1) return absl::OkStatus();
  int64_t size = rank_ == root ? static_cast<int64_t>(bytes->size()) : 0;
  int rc = MPI_Bcast(&size, 1, MPI_INT64_T, root, comm_);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast (size)", rc);
  if (rank_ != root) bytes->resize(static_cast<size_t>(size));
  for (int64_t begin = 0; begin < size; begin += INT_MAX) {
    const int64_t len = std::min<int64_t>(INT_MAX, size - begin);
    rc = MPI_Bcast(bytes->data() + begin, static_cast<int>(len), MPI_BYTE, root, comm_);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast (bytes)", rc);
  }
  return absl::OkStatus();
}

void MpiCommunicator::Abort(std::string_view reason) {
  std::fprintf(stderr, "rank %d of %d: %.*s: aborting the group\n", rank_, world_size_,
               static_cast<int>(reason.size()), reason.data());
  MPI_Abort(comm_, 1);
  std::_Exit(1);  // MPI_Abort does not return; this says so to the compiler
}

}  // namespace tandem::parallel
