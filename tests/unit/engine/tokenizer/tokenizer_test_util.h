// Shared helpers for the tokenizer tests: the default model and the
// llama.cpp reference data under tests/reference/tokenizer/.
#ifndef TANDEM_TESTS_UNIT_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "nlohmann/json.hpp"

namespace tandem::tokenizer::testing {

// $TANDEM_MODEL, else the default model under models/ in the source tree.
inline std::string ModelPath() {
  const char* env = std::getenv("TANDEM_MODEL");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(TANDEM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline absl::StatusOr<Vocab> LoadModelVocab() {
  ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(ModelPath()));
  return LoadVocabFromGguf(*file);
}

inline absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer() {
  ASSIGN_OR_RETURN(Vocab vocab, LoadModelVocab());
  return Tokenizer::Create(std::move(vocab));
}

// One text of tests/reference/tokenizer/expected_tokens.jsonl.
struct ReferenceCase {
  std::string text;
  std::vector<int32_t> ids_special;  // llama_tokenize(parse_special=true)
  std::vector<int32_t> ids_plain;    // llama_tokenize(parse_special=false)
  std::string detok_special;         // pieces of ids_special, special shown
  std::string detok_plain;           // pieces of ids_special, special hidden
};

struct ReferenceData {
  nlohmann::json vocab;  // the summary line
  std::vector<ReferenceCase> cases;
};

inline std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Reads the reference file; an empty result when it is missing or malformed.
inline ReferenceData ReadReferenceData() {
  ReferenceData data;
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) +
                   "/tests/reference/tokenizer/expected_tokens.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("vocab")) {
      data.vocab = j["vocab"];
      continue;
    }
    ReferenceCase c;
    c.text = j["text"].get<std::string>();
    c.ids_special = j["ids_special"].get<std::vector<int32_t>>();
    c.ids_plain = j["ids_plain"].get<std::vector<int32_t>>();
    c.detok_special = FromHex(j["detok_special"].get<std::string>());
    c.detok_plain = FromHex(j["detok_plain"].get<std::string>());
    data.cases.push_back(std::move(c));
  }
  return data;
}

}  // namespace tandem::tokenizer::testing

#endif  // TANDEM_TESTS_UNIT_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
