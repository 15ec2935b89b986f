#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include "common/logging.h"

namespace tandem::kernels {
namespace {

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#endif
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

Isa HardwareIsa() {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) return Isa::kAvx512;
  if (f.avx2) return Isa::kAvx2;
  return Isa::kReference;
}

Isa ClampIsa(Isa requested) {
  Isa hw = HardwareIsa();
  return static_cast<int>(requested) <= static_cast<int>(hw) ? requested : hw;
}

bool ParseIsa(const char* name, Isa* isa) {
  if (std::strcmp(name, "reference") == 0 || std::strcmp(name, "scalar") == 0) {
    *isa = Isa::kReference;
  } else if (std::strcmp(name, "avx2") == 0) {
    *isa = Isa::kAvx2;
  } else if (std::strcmp(name, "avx512") == 0) {
    *isa = Isa::kAvx512;
  } else {
    return false;
  }
  return true;
}

Isa BestIsa() {
  Isa hw = HardwareIsa();
  const char* env = std::getenv("TANDEM_ISA");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "auto") == 0) return hw;
  Isa wanted;
  if (!ParseIsa(env, &wanted)) {
    TANDEM_LOG(kWarning, "TANDEM_ISA=%s is not one of auto|avx512|avx2|scalar (reference); using %s", env,
               IsaName(hw));
    return hw;
  }
  if (static_cast<int>(wanted) > static_cast<int>(hw)) {
    TANDEM_LOG(kWarning, "TANDEM_ISA=%s but this CPU supports at most %s; using %s", env,
               IsaName(hw), IsaName(hw));
    return hw;
  }
  return wanted;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kReference:
      return "reference";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

}  // namespace tandem::kernels
