#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

TEST(CpuFeaturesTest, NamesRoundTrip) {
  for (Isa isa : {Isa::kReference, Isa::kAvx2, Isa::kAvx512}) {
    Isa parsed;
    ASSERT_TRUE(ParseIsa(IsaName(isa), &parsed)) << IsaName(isa);
    EXPECT_EQ(parsed, isa);
  }
  Isa parsed;
  ASSERT_TRUE(ParseIsa("scalar", &parsed));
  EXPECT_EQ(parsed, Isa::kReference);
  EXPECT_FALSE(ParseIsa("sse9", &parsed));
}

TEST(CpuFeaturesTest, HardwareIsaMatchesFeatures) {
  const CpuFeatures& f = GetCpuFeatures();
  Isa hw = HardwareIsa();
  if (hw == Isa::kAvx512) {
    EXPECT_TRUE(f.avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  }
  if (hw >= Isa::kAvx2) {
    EXPECT_TRUE(f.avx2);
  }
  if (!f.avx2) {
    EXPECT_EQ(hw, Isa::kReference);
  }
  EXPECT_EQ(ClampIsa(Isa::kReference), Isa::kReference);
  EXPECT_EQ(ClampIsa(Isa::kAvx512), hw);
}

TEST(CpuFeaturesTest, EnvironmentOverride) {
  const Isa hw = HardwareIsa();
  unsetenv("TANDEM_ISA");
  EXPECT_EQ(BestIsa(), hw);
  setenv("TANDEM_ISA", "auto", 1);
  EXPECT_EQ(BestIsa(), hw);
  setenv("TANDEM_ISA", "reference", 1);
  EXPECT_EQ(BestIsa(), Isa::kReference);
  setenv("TANDEM_ISA", "scalar", 1);
  EXPECT_EQ(BestIsa(), Isa::kReference);
  setenv("TANDEM_ISA", "avx2", 1);
  EXPECT_EQ(BestIsa(), hw >= Isa::kAvx2 ? Isa::kAvx2 : hw);
  setenv("TANDEM_ISA", "avx512", 1);
  EXPECT_EQ(BestIsa(), hw);  // more than the CPU has falls back to the hardware level
  setenv("TANDEM_ISA", "bogus", 1);
  EXPECT_EQ(BestIsa(), hw);
  unsetenv("TANDEM_ISA");
}

}  // namespace
}  // namespace tandem::kernels
