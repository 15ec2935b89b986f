// `tandem make-model`: writes a GGUF with random weights of a known model's
// shape and real vocabulary size (engine/model/model_generator.h), so GPU
// throughput can be measured without downloading weights.
#ifndef TANDEM_CLIENT_COMMANDS_MAKE_MODEL_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_MAKE_MODEL_COMMAND_H_

#include <cstdint>
#include <string>

namespace tandem::client {

struct MakeModelOptions {
  std::string shape;       // --shape: llama3-8b, llama2-7b, smollm2-135m, toy or tiny
  std::string dtype;       // --dtype: bf16 or q8_0 (norms are always f32)
  std::string out;         // --out: the GGUF to write (replaced when complete)
  uint64_t seed = 0;       // --seed: same seed, same file bytes
  std::string vocab_from;  // --vocab-from: GGUF whose tokenizer.* to copy; empty: synthetic
};

// Prints progress every few layers to stderr and the written path to stdout.
// Returns the exit code: 0, or 1 after printing the error (unknown shape or
// dtype, unreadable --vocab-from, too little disk space, I/O failure) to
// stderr. A --vocab-from file whose vocabulary size differs from the shape's
// is reported on stderr and a synthetic vocabulary is written instead.
int MakeModelCommand(const MakeModelOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_MAKE_MODEL_COMMAND_H_
