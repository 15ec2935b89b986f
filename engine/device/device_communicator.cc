// DeviceCommunicator's backend-independent parts: device selection and the
// local rank. The collectives are in device_communicator_nccl.cc (GPUs) and
// device_communicator_emulated.cc.
#include "engine/device/device_communicator.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tandem::device {

absl::StatusOr<int> DeviceOrdinalFor(const std::vector<int>& gpus, int local_rank,
                                     int device_count) {
  if (!gpus.empty() && local_rank >= static_cast<int>(gpus.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpus %s lists %d devices, but this is local rank %d: list one per rank on the node",
        absl::StrJoin(gpus, ","), gpus.size(), local_rank));
  }
  // One visible device (e.g. CUDA_VISIBLE_DEVICES set per rank): it is this
  // rank's, whatever its local rank.
  const int ordinal = !gpus.empty() ? gpus[local_rank] : device_count == 1 ? 0 : local_rank;
  if (ordinal < 0 || ordinal >= device_count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local rank %d would use device %d, but this node has %d (ordinals 0..%d)%s", local_rank,
        ordinal, device_count, device_count - 1,
        gpus.empty() ? "; give --gpus or run fewer ranks per node" : ""));
  }
  return ordinal;
}

int LocalRank(int fallback) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "MPI_LOCALRANKID"}) {
    const char* value = std::getenv(name);
    int rank = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &rank) && rank >= 0) return rank;
  }
  return fallback;
}

}  // namespace tandem::device
