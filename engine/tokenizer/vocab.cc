#include "engine/tokenizer/vocab.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"

namespace tandem::tokenizer {
namespace {

absl::Status CheckSpecialId(absl::string_view name, int32_t id, int32_t size) {
  if (id == kNoToken || (id >= 0 && id < size)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "vocab ", name, " id ", id, " is out of range [0, ", size, ")"));
}

// Reads an optional token id; kNoToken when the key is absent.
absl::StatusOr<int32_t> ReadOptionalId(const gguf::GgufFile& file,
                                       const std::string& key) {
  if (file.FindMetadata(key) == nullptr) return kNoToken;
  ASSIGN_OR_RETURN(const int64_t id, file.GetInt(key));
  if (id < 0 || id > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF ", key, " = ", id, " is not a valid token id (0..", INT32_MAX, ")"));
  }
  return static_cast<int32_t>(id);
}

absl::StatusOr<bool> ReadOptionalBool(const gguf::GgufFile& file,
                                      const std::string& key, bool fallback) {
  if (file.FindMetadata(key) == nullptr) return fallback;
  return file.GetBool(key);
}

}  // namespace

absl::Status Vocab::Validate() const {
  if (tokens.empty()) {
    return absl::InvalidArgumentError("vocab has 0 tokens (need at least 1)");
  }
  if (types.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab has ", types.size(), " token types for ", tokens.size(),
        " tokens (need one per token)"));
  }
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab has ", tokens.size(), " tokens (limit ", INT32_MAX, ")"));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const int32_t t = static_cast<int32_t>(types[i]);
    if (t < 0 || t > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab token ", i, " has type ", t, " (valid types are 0..6)"));
    }
  }
  RETURN_IF_ERROR(CheckSpecialId("bos", bos_id, size()));
  RETURN_IF_ERROR(CheckSpecialId("eos", eos_id, size()));
  RETURN_IF_ERROR(CheckSpecialId("unk", unk_id, size()));
  RETURN_IF_ERROR(CheckSpecialId("pad", pad_id, size()));
  if (add_bos && bos_id == kNoToken) {
    return absl::InvalidArgumentError("vocab asks to add BOS but has no bos id");
  }
  if (add_eos && eos_id == kNoToken) {
    return absl::InvalidArgumentError("vocab asks to add EOS but has no eos id");
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& merge = merges[i];
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab merge ", i, " \"", merge,
          "\" is not of the form \"left right\" (both non-empty)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocab> LoadVocabFromGguf(const gguf::GgufFile& file) {
  Vocab vocab;
  ASSIGN_OR_RETURN(vocab.model, file.GetString("tokenizer.ggml.model"));
  if (vocab.model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat(
        "tokenizer model \"", vocab.model,
        "\" is not supported (only \"gpt2\", byte-level BPE)"));
  }
  if (file.FindMetadata("tokenizer.ggml.pre") != nullptr) {
    ASSIGN_OR_RETURN(vocab.pre, file.GetString("tokenizer.ggml.pre"));
  } else {
    // llama.cpp treats a missing name as its legacy default; we refuse to
    // guess and let the tokenizer reject it by name.
    vocab.pre = "";
  }
  if (file.FindMetadata("tokenizer.ggml.tokens") == nullptr) {
    return absl::NotFoundError("GGUF has no tokenizer.ggml.tokens");
  }
  ASSIGN_OR_RETURN(vocab.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  if (file.FindMetadata("tokenizer.ggml.token_type") != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                     file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != vocab.tokens.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF tokenizer.ggml.token_type has ", types.size(),
          " entries for ", vocab.tokens.size(), " tokens"));
    }
    vocab.types.reserve(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < 0 || types[i] > static_cast<int64_t>(TokenType::kByte)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GGUF token ", i, " has type ", types[i], " (valid types are 0..6)"));
      }
      vocab.types.push_back(static_cast<TokenType>(types[i]));
    }
  } else {
    vocab.types.assign(vocab.tokens.size(), TokenType::kNormal);
  }
  if (file.FindMetadata("tokenizer.ggml.merges") != nullptr) {
    ASSIGN_OR_RETURN(vocab.merges, file.GetStringArray("tokenizer.ggml.merges"));
  }
  ASSIGN_OR_RETURN(vocab.bos_id, ReadOptionalId(file, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(vocab.eos_id, ReadOptionalId(file, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(vocab.unk_id,
                   ReadOptionalId(file, "tokenizer.ggml.unknown_token_id"));
  ASSIGN_OR_RETURN(vocab.pad_id,
                   ReadOptionalId(file, "tokenizer.ggml.padding_token_id"));
  const bool llama3 = vocab.pre == "llama3" || vocab.pre == "llama-v3" ||
                      vocab.pre == "llama-bpe";
  ASSIGN_OR_RETURN(vocab.add_bos,
                   ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", llama3));
  ASSIGN_OR_RETURN(vocab.add_eos,
                   ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", false));
  if (file.FindMetadata("tokenizer.chat_template") != nullptr) {
    ASSIGN_OR_RETURN(vocab.chat_template, file.GetString("tokenizer.chat_template"));
  }
  RETURN_IF_ERROR(vocab.Validate());
  return vocab;
}

}  // namespace tandem::tokenizer
