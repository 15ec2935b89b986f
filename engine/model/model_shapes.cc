#include "engine/model/model_shapes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tandem::model {

const std::vector<ModelShape>& KnownModelShapes() {
  // From each model's published config.json (Meta-Llama-3-8B, Llama-2-7b-hf,
  // SmolLM2-135M-Instruct).
  static const auto* const kShapes = [] {
    auto* shapes = new std::vector<ModelShape>{
      {.name = "llama3-8b",
       .num_layers = 32,
       .hidden_dim = 4096,
       .ffn_dim = 14336,
       .num_heads = 32,
       .num_kv_heads = 8,
       .vocab_size = 128256,
       .context_length = 8192,
       .rope_freq_base = 500000.0f,
       .rms_norm_eps = 1e-5f,
       .tied_output = false},
      {.name = "llama2-7b",
       .num_layers = 32,
       .hidden_dim = 4096,
       .ffn_dim = 11008,
       .num_heads = 32,
       .num_kv_heads = 32,
       .vocab_size = 32000,
       .context_length = 4096,
       .rope_freq_base = 10000.0f,
       .rms_norm_eps = 1e-5f,
       .tied_output = false},
      {.name = "smollm2-135m",
       .num_layers = 30,
       .hidden_dim = 576,
       .ffn_dim = 1536,
       .num_heads = 9,
       .num_kv_heads = 3,
       .vocab_size = 49152,
       .context_length = 8192,
       .rope_freq_base = 100000.0f,
       .rms_norm_eps = 1e-5f,
       .tied_output = true},
      // Not a real model: SmolLM2's vocabulary (--vocab-from its GGUF) over
      // 4 small layers whose 6 query and 3 KV heads split over 2 and 3
      // tensor-parallel ranks like SmolLM2-135M's: a draft that shares the
      // default model's vocabulary (speculative_test), and emulated-GPU
      // benchmarks by hand.
      {.name = "toy",
       .num_layers = 4,
       .hidden_dim = 192,
       .ffn_dim = 512,
       .num_heads = 6,
       .num_kv_heads = 3,
       .vocab_size = 49152,
       .context_length = 2048,
       .rope_freq_base = 100000.0f,
       .rms_norm_eps = 1e-5f,
       .tied_output = true},
      // Not a real model either: toy's heads (6 query, 3 KV of 32 dims) over
      // 2 layers and a synthetic vocabulary of 1024 tokens, so the output
      // head and the sampler cost little. What the emulated-GPU tests run:
      // the emulator executes every CUDA thread on the CPU, where toy's
      // 49152-row head and vocabulary-wide sampling took most of each step.
      // Its own output matrix, 15x the default spread: logits of about 4
      // units, a peaked next-token distribution (with the embedding's it
      // would mostly predict the current token again).
      {.name = "tiny",
       .num_layers = 2,
       .hidden_dim = 192,
       .ffn_dim = 512,
       .num_heads = 6,
       .num_kv_heads = 3,
       .vocab_size = 1024,
       .context_length = 2048,
       .rope_freq_base = 100000.0f,
       .rms_norm_eps = 1e-5f,
       .tied_output = false,
       .output_std = 0.3f},
    };
    // toy's layers over SmolLM2's vocabulary (--vocab-from its GGUF) with
    // tiny's kind of output matrix: text and chat prompts tokenize as with
    // the real model, and the peaked, untied head makes greedy tokens vary
    // (toy's tied head mostly repeats the current token). What the CPU
    // tensor-parallel proof test runs: ~12x less work per token than
    // SmolLM2-135M, and the same head split over 2 and 3 ranks.
    ModelShape toy_head = *std::find_if(shapes->begin(), shapes->end(),
                                        [](const ModelShape& s) { return s.name == "toy"; });
    toy_head.name = "toy-head";
    toy_head.tied_output = false;
    toy_head.output_std = 0.3f;
    shapes->push_back(std::move(toy_head));
    return shapes;
  }();
  return *kShapes;
}

absl::StatusOr<ModelShape> FindModelShape(std::string_view name) {
  std::vector<std::string> names;
  for (const ModelShape& shape : KnownModelShapes()) {
    if (shape.name == name) return shape;
    names.push_back(shape.name);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown model shape '%s' (known shapes: %s)", name, absl::StrJoin(names, ", ")));
}

}  // namespace tandem::model
