// The device's memory bandwidth as a device-to-device copy measures it: the
// denominator of the HBM roofline in tandem-gpu-bench.
#ifndef TANDEM_BENCH_GPU_BENCH_COPY_BANDWIDTH_H_
#define TANDEM_BENCH_GPU_BENCH_COPY_BANDWIDTH_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tandem::bench {

// Copies `bytes` between two device buffers on the current device `repeats`
// times after one warm-up copy, each timed with events; returns the median's
// (bytes read + bytes written) / time in GB/s (1e9 bytes). ResourceExhausted
// when the buffers do not fit; INTERNAL for a CUDA error.
absl::StatusOr<double> MeasureCopyBandwidth(int64_t bytes, int repeats);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_BENCH_COPY_BANDWIDTH_H_
