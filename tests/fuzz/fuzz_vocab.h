// The vocabulary the tokenizer and chat-template fuzzers run on: that of
// $TANDEM_MODEL (run_fuzz.sh sets it), else the default model in the source
// tree. A fuzzer cannot start without it, so a failure ends the process.
#ifndef TANDEM_TESTS_FUZZ_FUZZ_VOCAB_H_
#define TANDEM_TESTS_FUZZ_FUZZ_VOCAB_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::fuzz {

// Prints "<target>: <what>: <status>" and exits 1.
[[noreturn]] inline void Die(const char* target, const char* what, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s: %s\n", target, what, status.ToString().c_str());
  std::exit(1);
}

inline tokenizer::Vocab LoadFuzzVocab(const char* target) {
  const char* env = std::getenv("TANDEM_MODEL");
  const std::string path =
      env != nullptr && env[0] != '\0'
          ? std::string(env)
          : std::string(TANDEM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto file = gguf::GgufFile::Open(path);
  if (!file.ok()) Die(target, "opening the model", file.status());
  auto vocab = tokenizer::LoadVocabFromGguf(**file);
  if (!vocab.ok()) Die(target, "loading the vocabulary", vocab.status());
  return *std::move(vocab);
}

}  // namespace tandem::fuzz

#endif  // TANDEM_TESTS_FUZZ_FUZZ_VOCAB_H_
