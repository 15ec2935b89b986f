#include "engine/model/model_generator.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_writer.h"
#include "kernels/quant_formats.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::model {
namespace {

// llama_ftype values for general.file_type.
constexpr uint32_t kFileTypeMostlyQ8_0 = 7;
constexpr uint32_t kFileTypeMostlyBf16 = 32;
// general.quantization_version of current ggml quantized files.
constexpr uint32_t kQuantizationVersion = 2;

constexpr int32_t kEndOfTextId = 256;

// The characters synthetic filler tokens are spelled with: a word start
// (space), letters, digits and a full stop. 64 of them, so
// 64 two-character and 64^2 three-character tokens can be built by merges.
constexpr std::string_view kFillerAlphabet =
    " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.";
static_assert(kFillerAlphabet.size() == 64);
constexpr int64_t kSyntheticVocabMaxSize =
    kSyntheticVocabMinSize + 64 * 64 + 64 * 64 * 64;

constexpr std::string_view kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, statistically sound PRNG
// whose whole state is one word, so each matrix row gets its own stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below is finite.
  double NextOpenUnit() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// The stream of (seed, tensor, row): distinct inputs give unrelated streams.
uint64_t RowSeed(uint64_t seed, size_t tensor_index, int64_t row) {
  SplitMix64 mix(seed);
  uint64_t s = mix.Next() ^ (static_cast<uint64_t>(tensor_index) * 0xd1b54a32d192ed03ull);
  SplitMix64 mix2(s);
  return mix2.Next() ^ (static_cast<uint64_t>(row) * 0x8cb92ba72f3d8dd7ull);
}

// Fills x[0, n) with N(0, stddev) samples (Box-Muller).
void FillNormal(SplitMix64& rng, float stddev, float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(rng.NextOpenUnit())) * stddev;
    const double angle = 2.0 * std::numbers::pi * rng.NextOpenUnit();
    x[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < n) x[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

// One tensor of the generated file.
struct TensorPlan {
  std::string name;
  gguf::GgmlType type;
  std::vector<int64_t> dims;  // ggml order: {cols} or {cols, rows}
  float stddev = 0.0f;        // 0: a norm, filled with 1.0
  int32_t layer = -1;         // the layer this tensor completes, else -1
};

std::vector<TensorPlan> PlanTensors(const ModelShape& s, gguf::GgmlType dtype) {
  const int64_t hidden = s.hidden_dim;
  const int64_t head_dim = s.hidden_dim / s.num_heads;
  const int64_t q_dim = head_dim * s.num_heads;
  const int64_t kv_dim = head_dim * s.num_kv_heads;
  const float std_in = kGeneratedWeightStd;
  const float std_out = kGeneratedWeightStd / std::sqrt(2.0f * static_cast<float>(s.num_layers));
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", dtype, {hidden, s.vocab_size}, std_in});
  for (int32_t l = 0; l < s.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    plan.push_back({p + "attn_norm.weight", gguf::GgmlType::kF32, {hidden}, 0.0f});
    plan.push_back({p + "attn_q.weight", dtype, {hidden, q_dim}, std_in});
    plan.push_back({p + "attn_k.weight", dtype, {hidden, kv_dim}, std_in});
    plan.push_back({p + "attn_v.weight", dtype, {hidden, kv_dim}, std_in});
    plan.push_back({p + "attn_output.weight", dtype, {q_dim, hidden}, std_out});
    plan.push_back({p + "ffn_norm.weight", gguf::GgmlType::kF32, {hidden}, 0.0f});
    plan.push_back({p + "ffn_gate.weight", dtype, {hidden, s.ffn_dim}, std_in});
    plan.push_back({p + "ffn_up.weight", dtype, {hidden, s.ffn_dim}, std_in});
    plan.push_back({p + "ffn_down.weight", dtype, {s.ffn_dim, hidden}, std_out, l});
  }
  plan.push_back({"output_norm.weight", gguf::GgmlType::kF32, {hidden}, 0.0f});
  if (!s.tied_output) {
    plan.push_back({"output.weight", dtype, {hidden, s.vocab_size},
                    s.output_std > 0.0f ? s.output_std : std_in});
  }
  return plan;
}

absl::Status ValidateShape(const ModelShape& s, gguf::GgmlType dtype) {
  const std::pair<const char*, int32_t> sizes[] = {
      {"num_layers", s.num_layers}, {"hidden_dim", s.hidden_dim},
      {"ffn_dim", s.ffn_dim},       {"num_heads", s.num_heads},
      {"num_kv_heads", s.num_kv_heads}, {"vocab_size", s.vocab_size},
      {"context_length", s.context_length}};
  for (const auto& [field, value] : sizes) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model shape '%s' has %s = %d (must be >= 1)", s.name, field, value));
    }
  }
  if (s.hidden_dim % s.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model shape '%s': hidden_dim %d is not a multiple of num_heads %d", s.name,
        s.hidden_dim, s.num_heads));
  }
  if (s.num_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model shape '%s': num_heads %d is not a multiple of num_kv_heads %d", s.name,
        s.num_heads, s.num_kv_heads));
  }
  if ((s.hidden_dim / s.num_heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model shape '%s': head size %d must be even for RoPE", s.name,
        s.hidden_dim / s.num_heads));
  }
  const int64_t block = gguf::TypeTraits(dtype).block_size;
  if (s.hidden_dim % block != 0 || s.ffn_dim % block != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model shape '%s': hidden_dim %d and ffn_dim %d must be multiples of the %s block "
        "size %d", s.name, s.hidden_dim, s.ffn_dim, gguf::TypeName(dtype), block));
  }
  if (!(s.rope_freq_base > 0) || !(s.rms_norm_eps > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model shape '%s': rope_freq_base %g and rms_norm_eps %g must be > 0", s.name,
        s.rope_freq_base, s.rms_norm_eps));
  }
  return absl::OkStatus();
}

// A byte-level BPE vocabulary of exactly `size` tokens. Ids 0..255 are the
// bytes (GPT-2 byte-unicode text), 256 <|endoftext|>, 257 <|im_start|>,
// 258 <|im_end|>; then every two-character string over kFillerAlphabet,
// then three-character ones, each made by the merge "<prefix> <last char>"
// whose rank is its creation order, so every merge's operands are tokens
// that already exist.
struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
};

absl::StatusOr<SyntheticVocab> BuildSyntheticVocab(int32_t size) {
  if (size < kSyntheticVocabMinSize || size > kSyntheticVocabMaxSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a synthetic vocabulary of %d tokens is impossible: it must be in [%d, %d] (give a "
        "vocabulary source of that size instead)", size, kSyntheticVocabMinSize,
        kSyntheticVocabMaxSize));
  }
  SyntheticVocab v;
  v.tokens.reserve(size);
  v.types.reserve(size);
  for (int b = 0; b < 256; ++b) {
    std::string text;
    tokenizer::AppendByteEncoded(std::string_view(reinterpret_cast<const char*>(&b), 1), text);
    v.tokens.push_back(std::move(text));
    v.types.push_back(static_cast<int32_t>(tokenizer::TokenType::kNormal));
  }
  for (const char* control : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(control);
    v.types.push_back(static_cast<int32_t>(tokenizer::TokenType::kControl));
  }
  std::vector<std::string> alphabet;
  for (char c : kFillerAlphabet) {
    std::string text;
    tokenizer::AppendByteEncoded(std::string_view(&c, 1), text);
    alphabet.push_back(std::move(text));
  }
  // Level 1 extends single characters, level 2 the level-1 tokens.
  std::vector<std::string> prefixes = alphabet;
  while (v.tokens.size() < static_cast<size_t>(size)) {
    std::vector<std::string> next;
    for (const std::string& prefix : prefixes) {
      for (const std::string& last : alphabet) {
        if (v.tokens.size() == static_cast<size_t>(size)) break;
        v.merges.push_back(absl::StrCat(prefix, " ", last));
        v.tokens.push_back(prefix + last);
        v.types.push_back(static_cast<int32_t>(tokenizer::TokenType::kNormal));
        next.push_back(v.tokens.back());
      }
    }
    prefixes = std::move(next);
  }
  return v;
}

void AddSyntheticTokenizer(const SyntheticVocab& v, gguf::GgufWriter& w) {
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "gpt2");
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", v.types);
  w.AddStringArray("tokenizer.ggml.merges", v.merges);
  w.AddUint32("tokenizer.ggml.bos_token_id", kEndOfTextId);
  w.AddUint32("tokenizer.ggml.eos_token_id", kEndOfTextId);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddString("tokenizer.chat_template", std::string(kChatMlTemplate));
}

// Number of entries of `file`'s tokenizer.ggml.tokens; -1 when absent or not
// a string array.
int64_t VocabSizeOf(const gguf::GgufFile& file) {
  absl::StatusOr<const gguf::MetadataValue::Array*> tokens =
      file.GetArray("tokenizer.ggml.tokens", gguf::MetadataType::kString);
  return tokens.ok() ? static_cast<int64_t>((*tokens)->elements.size()) : -1;
}

// Fails with ResourceExhausted unless the file system holding `path` has
// `needed` bytes available to this user.
absl::Status CheckFreeSpace(const std::string& path, uint64_t needed) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0) {
    const std::string reason = std::generic_category().message(errno);
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrFormat(
          "output directory '%s' of '%s' does not exist: %s", dir.string(), path, reason));
    }
    return absl::UnavailableError(
        absl::StrFormat("cannot stat the file system of '%s': %s", dir.string(), reason));
  }
  const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (available < needed) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "'%s' needs %d bytes (%.2f GiB) but only %d bytes (%.2f GiB) are available in '%s'",
        path, needed, needed / 1073741824.0, available, available / 1073741824.0,
        dir.string()));
  }
  return absl::OkStatus();
}

// Encodes `n` floats as one row of `type` (F32, BF16 or Q8_0) at `out`.
void EncodeRow(gguf::GgmlType type, const float* x, int64_t n, char* out) {
  switch (type) {
    case gguf::GgmlType::kF32:
      std::memcpy(out, x, n * sizeof(float));
      return;
    case gguf::GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = gguf::Fp32ToBf16(x[i]);
        std::memcpy(out + 2 * i, &h, sizeof(h));
      }
      return;
    case gguf::GgmlType::kQ8_0:
      gguf::QuantizeRowQ8_0(x, n, reinterpret_cast<gguf::BlockQ8_0*>(out));
      return;
    default:
      CHECK(false, "EncodeRow: unsupported type %s", gguf::TypeName(type));
  }
}

// The encoded bytes of tensor `index` of `plan`; rows generated in parallel.
std::string ProduceTensor(const TensorPlan& t, size_t index, uint64_t seed, ThreadPool& pool) {
  const int64_t cols = t.dims[0];
  const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
  const gguf::GgmlTypeTraits& traits = gguf::TypeTraits(t.type);
  const int64_t row_bytes = cols / traits.block_size * traits.type_size;
  std::string bytes(static_cast<size_t>(rows * row_bytes), '\0');
  pool.ParallelFor(rows, std::max<int64_t>(1, 65536 / cols),
                   [&](int, int64_t begin, int64_t end) {
                     std::vector<float> row(cols);
                     for (int64_t r = begin; r < end; ++r) {
                       if (t.stddev == 0.0f) {
                         std::fill(row.begin(), row.end(), 1.0f);
                       } else {
                         SplitMix64 rng(RowSeed(seed, index, r));
                         FillNormal(rng, t.stddev, row.data(), cols);
                       }
                       EncodeRow(t.type, row.data(), cols, bytes.data() + r * row_bytes);
                     }
                   });
  return bytes;
}

}  // namespace

absl::StatusOr<gguf::GgmlType> ParseGeneratorDtype(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "bf16") return gguf::GgmlType::kBF16;
  if (lower == "q8_0") return gguf::GgmlType::kQ8_0;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown dtype '%s' (known dtypes: bf16, q8_0)", name));
}

absl::Status GenerateModel(const ModelShape& shape, gguf::GgmlType dtype, uint64_t seed,
                           const std::string& out_path, const gguf::GgufFile* vocab_source,
                           const GenerateProgress& progress) {
  if (dtype != gguf::GgmlType::kBF16 && dtype != gguf::GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot generate %s weights (supported: BF16, Q8_0)", gguf::TypeName(dtype)));
  }
  RETURN_IF_ERROR(ValidateShape(shape, dtype));

  gguf::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", absl::StrCat("tandem random ", shape.name));
  w.AddUint32("llama.block_count", shape.num_layers);
  w.AddUint32("llama.context_length", shape.context_length);
  w.AddUint32("llama.embedding_length", shape.hidden_dim);
  w.AddUint32("llama.feed_forward_length", shape.ffn_dim);
  w.AddUint32("llama.attention.head_count", shape.num_heads);
  w.AddUint32("llama.attention.head_count_kv", shape.num_kv_heads);
  w.AddFloat32("llama.rope.freq_base", shape.rope_freq_base);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", shape.rms_norm_eps);
  w.AddUint32("general.file_type",
              dtype == gguf::GgmlType::kQ8_0 ? kFileTypeMostlyQ8_0 : kFileTypeMostlyBf16);
  w.AddUint32("llama.vocab_size", shape.vocab_size);
  w.AddUint32("llama.rope.dimension_count", shape.hidden_dim / shape.num_heads);
  if (vocab_source != nullptr && VocabSizeOf(*vocab_source) == shape.vocab_size) {
    for (const auto& [key, value] : vocab_source->metadata()) {
      if (key.starts_with("tokenizer.")) w.Add(key, value);
    }
  } else {
    ASSIGN_OR_RETURN(const SyntheticVocab vocab, BuildSyntheticVocab(shape.vocab_size));
    AddSyntheticTokenizer(vocab, w);
  }
  w.AddUint32("general.quantization_version", kQuantizationVersion);

  const std::vector<TensorPlan> plan = PlanTensors(shape, dtype);
  for (const TensorPlan& t : plan) RETURN_IF_ERROR(w.AddTensorInfo(t.name, t.type, t.dims));
  RETURN_IF_ERROR(CheckFreeSpace(out_path, w.FileSize()));

  ThreadPool pool(0);
  return w.WriteStreaming(out_path, [&](size_t index) -> absl::StatusOr<std::string> {
    const TensorPlan& t = plan[index];
    std::string bytes = ProduceTensor(t, index, seed, pool);
    if (t.layer >= 0 && progress) progress(t.layer + 1, shape.num_layers);
    return bytes;
  });
}

}  // namespace tandem::model
