// ParseSpeculativeSpec / FormatSpeculativeSpec: every accepted form round
// trips; malformed ones name the text and the accepted forms.
#include "draft/api/speculative_spec.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem::draft {
namespace {

TEST(SpeculativeSpecTest, ParsesEveryKind) {
  auto model = ParseSpeculativeSpec("model");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->kind, ProposerKind::kModel);
  EXPECT_TRUE(model->model_path.empty());

  auto path = ParseSpeculativeSpec("model:/m/draft.gguf");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->kind, ProposerKind::kModel);
  EXPECT_EQ(path->model_path, "/m/draft.gguf");

  auto skip = ParseSpeculativeSpec("layer-skip:8");
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->kind, ProposerKind::kLayerSkip);
  EXPECT_EQ(skip->num_layers, 8);

  auto ngram = ParseSpeculativeSpec("ngram");
  ASSERT_TRUE(ngram.ok());
  EXPECT_EQ(ngram->kind, ProposerKind::kNgram);

  for (const char* text : {"model", "model:/m/draft.gguf", "layer-skip:8", "ngram"}) {
    auto spec = ParseSpeculativeSpec(text);
    ASSERT_TRUE(spec.ok()) << text;
    EXPECT_EQ(FormatSpeculativeSpec(*spec), text);
  }
  EXPECT_EQ(ProposerKindName(ProposerKind::kLayerSkip), "layer-skip");
}

TEST(SpeculativeSpecTest, RejectsMalformedSpecs) {
  for (const char* text : {"", "eagle", "model:", "layer-skip", "layer-skip:", "layer-skip:x",
                           "layer-skip:0", "layer-skip:-2", "ngram:3"}) {
    auto spec = ParseSpeculativeSpec(text);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(spec.status().message().find(std::string("'") + text + "'"), std::string::npos)
        << spec.status();
  }
  auto zero = ParseSpeculativeSpec("layer-skip:0");
  EXPECT_NE(zero.status().message().find(">= 1"), std::string::npos) << zero.status();
}

TEST(SpeculativeSpecTest, RequestedDraftKinds) {
  for (const char* ok : {"", "ngram", "model", "layer-skip", "layer-skip:1", "layer-skip:20"}) {
    EXPECT_TRUE(ValidateRequestedDraft(ok).ok()) << ok;
  }
  for (const char* bad : {"eagle", "model:/tmp/x.gguf", "layer-skip:", "layer-skip:0", "NGRAM"}) {
    absl::Status s = ValidateRequestedDraft(bad);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("'") + bad + "'"), std::string::npos) << s;
  }
  EXPECT_EQ(DraftKindOfName("ngram"), "ngram");
  EXPECT_EQ(DraftKindOfName("layer-skip:20:SmolLM2 135M"), "layer-skip:20");
  EXPECT_EQ(DraftKindOfName("SmolLM2 135M"), "model");
  EXPECT_TRUE(DraftKindMatches("layer-skip", "layer-skip:20"));
  EXPECT_TRUE(DraftKindMatches("layer-skip:20", "layer-skip:20"));
  EXPECT_FALSE(DraftKindMatches("layer-skip:12", "layer-skip:20"));
  EXPECT_FALSE(DraftKindMatches("model", "ngram"));
  EXPECT_TRUE(DraftKindMatches("model", "model"));
}

}  // namespace
}  // namespace tandem::draft
