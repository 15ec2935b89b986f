#include "draft/api/speculative_spec.h"

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

absl::Status ValidateRequestedDraft(std::string_view requested) {
  if (requested.empty() || requested == "ngram" || requested == "model" ||
      requested == "layer-skip") {
    return absl::OkStatus();
  }
  if (requested.starts_with("layer-skip:")) {
    int32_t l = 0;
    if (absl::SimpleAtoi(Absl(requested.substr(11)), &l) && l >= 1) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "draft '%s' is not a draft kind: must be ngram, layer-skip, layer-skip:L (L >= 1) or model",
      Absl(requested)));
}

std::string DraftKindOfName(std::string_view model_name) {
  if (model_name == "ngram") return "ngram";
  if (model_name.starts_with("layer-skip:")) {
    const size_t end = model_name.find(':', 11);
    return std::string(model_name.substr(0, end));
  }
  return "model";
}

bool DraftKindMatches(std::string_view requested, std::string_view kind) {
  if (requested == "layer-skip") return kind.starts_with("layer-skip:");
  return requested == kind;
}

}  // namespace tandem::draft
