// Shared helpers for tests that run the real default model.
#ifndef TANDEM_TESTS_UNIT_ENGINE_MODEL_MODEL_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_ENGINE_MODEL_MODEL_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tandem::testing {

// The default model: $TANDEM_MODEL, else models/ in the source tree.
inline std::string DefaultModelPath() {
  const char* env = std::getenv("TANDEM_MODEL");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(TANDEM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Reads a committed JSONL file under tests/reference/.
inline std::vector<nlohmann::json> ReadReferenceJsonl(const std::string& relative_path) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/" + relative_path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UNIT_ENGINE_MODEL_MODEL_TEST_UTIL_H_
