#include "client/commands/tokenize_command.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "nlohmann/json.hpp"

namespace tandem::client {

int TokenizeCommand(const TokenizeOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "tandem tokenize: %s\n", s.ToString().c_str());
    return 1;
  };
  auto file = gguf::GgufFile::Open(o.model_path);
  if (!file.ok()) return fail(file.status());
  auto vocab = tokenizer::LoadVocabFromGguf(**file);
  if (!vocab.ok()) return fail(vocab.status());
  auto tok = tokenizer::Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return fail(tok.status());
  int line_no = 0;
  for (std::string line; std::getline(std::cin, line);) {
    ++line_no;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!o.decode) {
      if (!j.is_string()) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("line %d is not a JSON string", line_no)));
      }
      std::vector<int32_t> ids =
          (*tok)->Encode(j.get<std::string>(), o.add_special, o.parse_special);
      std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    } else {
      if (!j.is_array()) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("line %d is not a JSON array of token ids", line_no)));
      }
      std::vector<int32_t> ids;
      for (const auto& e : j) {
        if (!e.is_number_integer()) {
          return fail(absl::InvalidArgumentError(
              absl::StrFormat("line %d has a non-integer token id %s", line_no, e.dump())));
        }
        ids.push_back(e.get<int32_t>());
      }
      absl::StatusOr<std::string> text = (*tok)->Decode(ids, /*skip_special=*/false);
      if (!text.ok()) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("line %d: %s", line_no, text.status().message())));
      }
      std::printf("%s\n", nlohmann::json(*text).dump(-1, ' ', false,
                                                      nlohmann::json::error_handler_t::replace)
                              .c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tandem::client
