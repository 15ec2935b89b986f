#include "draft/proposer_factory.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "draft/model_proposer.h"
#include "engine/gguf/gguf_file.h"
#include "engine/device/model_runner_factory.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::draft {
namespace {

absl::StatusOr<std::unique_ptr<Proposer>> MakeNgramProposer(const ProposerOptions& options) {
  NgramProposerConfig config;
  config.vocab_size = options.vocab_size;
  config.min_n = options.ngram_min_n;
  config.max_n = options.ngram_max_n;
  config.max_sequences = options.ngram_max_sequences;
  if (!options.target_model_path.empty()) {
    // Metadata only: the mapping is dropped without touching the weights.
    ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file,
                     gguf::GgufFile::Open(options.target_model_path));
    ASSIGN_OR_RETURN(model::ModelConfig mc, model::ReadModelConfig(*file));
    if (options.vocab_size != 0 && options.vocab_size != mc.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "vocab_size (--vocab-size) %d disagrees with %s, whose vocabulary has %d tokens",
          options.vocab_size, options.target_model_path, mc.vocab_size));
    }
    config.vocab_size = mc.vocab_size;
    config.context_length = mc.context_length;
  } else if (options.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ngram without a model needs the target's vocabulary size: vocab_size (--vocab-size) %d "
        "must be >= 1",
        options.vocab_size));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<NgramProposer> proposer, NgramProposer::Create(config));
  return std::unique_ptr<Proposer>(std::move(proposer));
}

absl::StatusOr<std::unique_ptr<Proposer>> MakeModelProposer(const ProposerOptions& options) {
  const SpeculativeSpec& spec = options.spec;
  const bool layer_skip = spec.kind == ProposerKind::kLayerSkip;
  std::string path = options.target_model_path;
  if (!layer_skip && !spec.model_path.empty()) path = spec.model_path;
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--speculative %s needs a model path: %s", FormatSpeculativeSpec(spec),
        layer_skip ? "the target's GGUF" : "model:PATH or the draft worker's --model"));
  }
  if (options.model_options.num_layers != 0 || options.model_options.tp_world_size != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft model options: num_layers %d must be 0 (the spec sets it) and tp_world_size %d "
        "must be 1",
        options.model_options.num_layers, options.model_options.tp_world_size));
  }
  model::ModelOptions model_options = options.model_options;
  if (layer_skip) model_options.num_layers = spec.num_layers;
  model_options.cpu_weights = device::CpuWeightsFor(options.device.device);
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model, model::Model::Load(path, model_options));
  // A draft samples its proposals on the host from the logits Forward
  // copies there: no device sampler for its runner.
  device::DeviceChoice draft_device = options.device;
  draft_device.cuda.sample_on_device = false;
  ASSIGN_OR_RETURN(device::LoadedRunner loaded,
                   device::MakeModelRunner(model.get(),
                                           device::RunnerOptionsFor(draft_device,
                                                                    options.block_size,
                                                                    options.kv_blocks,
                                                                    options.kv_cache_bytes)));

  ModelProposerConfig config;
  config.kind = spec.kind;
  config.block_size = options.block_size;
  config.num_blocks = loaded.num_blocks;
  if (options.eos_token_ids.has_value()) {
    config.eos_token_ids = *options.eos_token_ids;
  } else {
    ASSIGN_OR_RETURN(tokenizer::Vocab vocab, tokenizer::LoadVocabFromGguf(model->file()));
    ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok,
                     tokenizer::Tokenizer::Create(std::move(vocab)));
    config.eos_token_ids = tok->EndOfGenerationIds();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ModelProposer> proposer,
                   ModelProposer::Create(std::move(model), std::move(loaded.runner), config));
  return std::unique_ptr<Proposer>(std::move(proposer));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Proposer>> MakeProposer(const ProposerOptions& options) {
  if (options.spec.kind == ProposerKind::kNgram) return MakeNgramProposer(options);
  return MakeModelProposer(options);
}

}  // namespace tandem::draft
