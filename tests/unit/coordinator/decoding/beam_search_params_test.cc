// ValidateBeamSearchParams: every limit, each error naming the value; the
// non-finite penalties the generate_request fuzzer found accepted.
#include <limits>

#include "coordinator/decoding/beam_search.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

BeamSearchParams Valid() {
  BeamSearchParams p;
  p.num_beams = 4;
  p.num_beam_groups = 2;
  p.num_return_sequences = 2;
  return p;
}

TEST(BeamSearchParamsTest, AcceptsValidParams) {
  EXPECT_TRUE(ValidateBeamSearchParams(Valid()).ok());
  BeamSearchParams p = Valid();
  p.length_penalty = -2.5;  // transformers allows any finite exponent
  p.diversity_penalty = 0.5;
  EXPECT_TRUE(ValidateBeamSearchParams(p).ok());
}

TEST(BeamSearchParamsTest, RejectsNonFinitePenalties) {
  for (double bad : {kInf, -kInf, std::numeric_limits<double>::quiet_NaN()}) {
    BeamSearchParams p = Valid();
    p.length_penalty = bad;
    absl::Status s = ValidateBeamSearchParams(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("length_penalty"), std::string::npos) << s;
    p = Valid();
    p.diversity_penalty = bad;
    s = ValidateBeamSearchParams(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("diversity_penalty"), std::string::npos) << s;
  }
}

TEST(BeamSearchParamsTest, RejectsCountsOutOfRange) {
  BeamSearchParams p = Valid();
  p.num_beam_groups = 3;  // does not divide 4
  EXPECT_EQ(ValidateBeamSearchParams(p).code(), absl::StatusCode::kInvalidArgument);
  p = Valid();
  p.num_return_sequences = 5;
  EXPECT_EQ(ValidateBeamSearchParams(p).code(), absl::StatusCode::kInvalidArgument);
  p = Valid();
  p.diversity_penalty = -1;
  EXPECT_EQ(ValidateBeamSearchParams(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::coordinator
