#include "draft/speculative_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::draft {
namespace {

constexpr char kForms[] = "model, model:PATH, layer-skip:L or ngram";

// (This Abseil's string_view is its own type, not std::string_view.)
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::StatusOr<SpeculativeSpec> ParseSpeculativeSpec(std::string_view text) {
  SpeculativeSpec spec;
  if (text == "model") return spec;
  if (text == "ngram") {
    spec.kind = ProposerKind::kNgram;
    return spec;
  }
  if (text.starts_with("model:")) {
    spec.model_path = std::string(text.substr(6));
    if (spec.model_path.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--speculative '%s' names no model path: must be %s", Absl(text), kForms));
    }
    return spec;
  }
  if (text.starts_with("layer-skip:")) {
    const std::string_view layers = text.substr(11);
    int32_t l = 0;
    if (!absl::SimpleAtoi(Absl(layers), &l)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--speculative '%s': layer count '%s' is not an integer: must be layer-skip:L with "
          "L >= 1",
          Absl(text), Absl(layers)));
    }
    if (l < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--speculative '%s': layer count %d is out of range: must be >= 1 (and at most the "
          "target's layers)",
          Absl(text), l));
    }
    spec.kind = ProposerKind::kLayerSkip;
    spec.num_layers = l;
    return spec;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("--speculative '%s' is not a draft kind: must be %s", Absl(text), kForms));
}

std::string FormatSpeculativeSpec(const SpeculativeSpec& spec) {
  switch (spec.kind) {
    case ProposerKind::kModel:
      return spec.model_path.empty() ? "model" : absl::StrCat("model:", spec.model_path);
    case ProposerKind::kLayerSkip:
      return absl::StrCat("layer-skip:", spec.num_layers);
    case ProposerKind::kNgram:
      return "ngram";
  }
  return "model";
}

}  // namespace tandem::draft
