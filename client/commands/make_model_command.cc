#include "client/commands/make_model_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_generator.h"
#include "engine/model/model_shapes.h"

namespace tandem::client {

int MakeModelCommand(const MakeModelOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "tandem make-model: %s\n", s.ToString().c_str());
    return 1;
  };
  absl::StatusOr<model::ModelShape> shape = model::FindModelShape(o.shape);
  if (!shape.ok()) return fail(shape.status());
  absl::StatusOr<gguf::GgmlType> dtype = model::ParseGeneratorDtype(o.dtype);
  if (!dtype.ok()) return fail(dtype.status());
  if (o.out.empty()) return fail(absl::InvalidArgumentError("--out is required"));

  std::unique_ptr<gguf::GgufFile> vocab_source;
  if (!o.vocab_from.empty()) {
    absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(o.vocab_from);
    if (!file.ok()) return fail(file.status());
    vocab_source = *std::move(file);
    absl::StatusOr<const gguf::MetadataValue::Array*> tokens =
        vocab_source->GetArray("tokenizer.ggml.tokens", gguf::MetadataType::kString);
    const int64_t size = tokens.ok() ? static_cast<int64_t>((*tokens)->elements.size()) : 0;
    if (size != shape->vocab_size) {
      std::fprintf(stderr,
                   "tandem make-model: %s has %lld tokens but %s needs %d; writing a "
                   "synthetic vocabulary instead\n",
                   o.vocab_from.c_str(), static_cast<long long>(size), shape->name.c_str(),
                   shape->vocab_size);
    }
  }

  const auto start = std::chrono::steady_clock::now();
  const int32_t every = std::max(1, shape->num_layers / 8);
  auto progress = [&](int32_t done, int32_t total) {
    if (done % every != 0 && done != total) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "tandem make-model: %d/%d layers written (%.1f s)\n", done, total,
                 seconds);
  };
  absl::Status status =
      model::GenerateModel(*shape, *dtype, o.seed, o.out, vocab_source.get(), progress);
  if (!status.ok()) return fail(status);
  std::printf("%s\n", o.out.c_str());
  return 0;
}

}  // namespace tandem::client
