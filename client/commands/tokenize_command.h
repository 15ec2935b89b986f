// `tandem tokenize`: one JSON string per stdin line → one JSON array of token
// ids per stdout line; with `decode`, the reverse. Loads only the vocabulary.
#ifndef TANDEM_CLIENT_COMMANDS_TOKENIZE_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_TOKENIZE_COMMAND_H_

#include <string>

namespace tandem::client {

struct TokenizeOptions {
  std::string model_path;
  bool decode = false;
  bool add_special = true;    // BOS/EOS as the GGUF says
  bool parse_special = true;  // special-token strings in the text become their ids
};

// Returns the exit code: 0, or 1 after printing an error naming the bad line.
int TokenizeCommand(const TokenizeOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_TOKENIZE_COMMAND_H_
