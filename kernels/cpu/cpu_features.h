// CPU feature detection and the run-time choice of kernel ISA.
//
// Thread-safety: all functions are thread-safe (detection runs once).
#ifndef TANDEM_KERNELS_CPU_CPU_FEATURES_H_
#define TANDEM_KERNELS_CPU_CPU_FEATURES_H_

#include "kernels/kernels.h"

namespace tandem::kernels {

// What the running CPU (and OS, for AVX-512 register state) supports.
struct CpuFeatures {
  bool avx2 = false;  // AVX2 + FMA + F16C together
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
};

// Detected once per process.
const CpuFeatures& GetCpuFeatures();

// The highest Isa the hardware can run, ignoring TANDEM_ISA. kAvx512 needs
// F+BW+VL+VNNI; kAvx2 needs AVX2+FMA+F16C.
Isa HardwareIsa();

// min(requested, HardwareIsa()): kernels call this on Params::isa so that a
// request the CPU cannot honour runs the best available code instead of
// faulting.
Isa ClampIsa(Isa requested);

// Parses "reference" (or "scalar") / "avx2" / "avx512"; false for anything else.
bool ParseIsa(const char* name, Isa* isa);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_CPU_FEATURES_H_
