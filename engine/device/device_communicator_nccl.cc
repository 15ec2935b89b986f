// DeviceCommunicator on GPUs: NCCL, bootstrapped over the host Communicator.
#include <nccl.h>

#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/device/device_communicator.h"

namespace tandem::device {
namespace {

absl::Status NcclStatus(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s: %s (NCCL %d)", what, ncclGetErrorString(result),
                                             static_cast<int>(result)));
}

}  // namespace

struct DeviceCommunicator::Backend {
  ~Backend() {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
  ncclComm_t comm = nullptr;
  int version = 0;  // ncclGetVersion's code of the loaded library
};

namespace {

// NCCL's version code of 2.9.0, the first that supports CUDA graph capture.
constexpr int kFirstCapturableNcclVersion = 20900;

}  // namespace

DeviceCommunicator::DeviceCommunicator(parallel::Communicator* host,
                                       std::unique_ptr<Backend> backend)
    : host_(host), backend_(std::move(backend)) {}

DeviceCommunicator::~DeviceCommunicator() = default;

absl::StatusOr<std::unique_ptr<DeviceCommunicator>> DeviceCommunicator::Create(
    parallel::Communicator* host) {
  ncclUniqueId id;
  std::string id_bytes;  // stays empty when rank 0 has no id: the others fail below
  absl::Status made;
  if (host->rank() == 0) {
    made = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (made.ok()) id_bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  RETURN_IF_ERROR(host->Broadcast(&id_bytes, 0));
  RETURN_IF_ERROR(made);
  if (id_bytes.size() != sizeof(id)) {
    return absl::InternalError(absl::StrFormat("the NCCL unique id broadcast has %d bytes, not %d",
                                               id_bytes.size(), sizeof(id)));
  }
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  auto backend = std::make_unique<Backend>();
  RETURN_IF_ERROR(NcclStatus(ncclGetVersion(&backend->version), "ncclGetVersion"));
  RETURN_IF_ERROR(NcclStatus(
      ncclCommInitRank(&backend->comm, host->world_size(), id, host->rank()),
      absl::StrFormat("ncclCommInitRank (rank %d of %d)", host->rank(), host->world_size())
          .c_str()));
  return std::unique_ptr<DeviceCommunicator>(new DeviceCommunicator(host, std::move(backend)));
}

bool DeviceCommunicator::capturable() const {
  return backend_->version >= kFirstCapturableNcclVersion;
}

absl::Status DeviceCommunicator::AllReduceSum(float* data, int64_t n, cudaStream_t stream) {
  return NcclStatus(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat32, ncclSum,
                                  backend_->comm, stream),
                    "ncclAllReduce");
}

}  // namespace tandem::device
