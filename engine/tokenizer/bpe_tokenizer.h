// Byte-level BPE tokenizer (GGUF tokenizer.ggml.model "gpt2"), matching
// llama.cpp's llama_tokenize / llama_token_to_piece token for token.
#ifndef TANDEM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
#define TANDEM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

// Turns text into token ids and back.
//
// Encode: (1) when parse_special, control / unknown / user-defined token
// texts found in the input become those tokens (user-defined ones are matched
// even without parse_special); longer texts are matched first, everywhere,
// as llama.cpp's tokenizer_st_partition does; (2) the rest is split into words
// by the vocabulary's pre-tokenizer; (3) each word's bytes are mapped through
// the GPT-2 byte<->unicode table and merged by BPE rank (lowest rank first,
// leftmost on ties). Any byte string encodes without error. Invalid UTF-8 is
// kept byte for byte (llama.cpp instead substitutes U+FFFD before splitting),
// so Decode() returns the input exactly whenever the vocab has a token for
// each of its bytes; a byte with no token (SmolLM2 has none for 0xC0, 0xC1,
// 0xF5..0xFF and a few others) is dropped, as llama.cpp drops it.
//
// Like llama.cpp, tokens whose text names an end of turn (<|im_end|>,
// <|endoftext|>, <|eot_id|>, ...) are treated as control tokens even if the
// file marks them otherwise.
//
// Thread-safety: immutable after Create(); every method is const and safe to
// call from any number of threads at once.
class Tokenizer {
 public:
  // Builds the lookup tables. Fails with InvalidArgument for an inconsistent
  // vocab (Vocab::Validate), Unimplemented naming the model for a model other
  // than "gpt2" or naming the pre-tokenizer for an unknown one.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Tokenizes `text` (any bytes). With add_special, BOS / EOS are added as the
  // vocab's add_bos / add_eos say. With parse_special, control-token texts in
  // `text` become control tokens; without it they are tokenized as plain text.
  // `literal`: sorted, disjoint byte ranges [begin, end) of `text` where no
  // control-token text is parsed (chat message content): a match
  // overlapping one is tokenized as plain text, everything else exactly as
  // without it (user-defined tokens are parsed everywhere, as always).
  struct ByteRange {
    size_t begin = 0;
    size_t end = 0;
  };
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const ByteRange> literal = {}) const;
  // True when `text` holds the text of a control token (one Encode parses
  // only with parse_special).
  bool HasControlText(std::string_view text) const;

  // Concatenates TokenToPiece of every id; with skip_special, control and
  // unknown tokens contribute nothing. The result is raw bytes and may be
  // invalid UTF-8 when `ids` ends inside a character. Fails with
  // InvalidArgument naming the first id outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids,
                                     bool skip_special) const;

  // The bytes token `id` stands for: byte-decoded text for normal tokens, the
  // literal text for control / unknown / user-defined ones, empty for unused,
  // byte and undefined types (as llama.cpp does for BPE vocabularies) and for
  // an id outside [0, vocab_size()).
  const std::string& TokenToPiece(int32_t id) const;

  int32_t vocab_size() const { return vocab_.size(); }
  int32_t bos_id() const { return vocab_.bos_id; }  // kNoToken when absent
  int32_t eos_id() const { return vocab_.eos_id; }  // kNoToken when absent
  const Vocab& vocab() const { return vocab_; }

  // Type of `id` after the end-of-turn adjustment; kUndefined when out of range.
  TokenType token_type(int32_t id) const;
  // True for control tokens (false for out-of-range ids).
  bool IsControl(int32_t id) const { return token_type(id) == TokenType::kControl; }
  // True for control / unknown tokens, the ones Decode(skip_special) drops.
  bool IsSkippedWhenSkippingSpecial(int32_t id) const;
  // True when generating `id` ends the turn (llama_vocab_is_eog).
  bool IsEndOfGeneration(int32_t id) const;
  // The EOS id plus every end-of-turn token, ascending, like llama.cpp's
  // special_eog_ids (which, for example, includes <reponame> as a FIM token).
  const std::vector<int32_t>& EndOfGenerationIds() const { return eog_ids_; }

  // Id of the token whose stored text is exactly `piece` (GGUF form: "Ġthe",
  // "<|im_end|>"). NotFound naming the piece when there is none.
  absl::StatusOr<int32_t> TokenId(std::string_view piece) const;

 private:
  // A merge of two adjacent pieces into `result`.
  struct MergeRule {
    int32_t rank;
    int32_t result;
  };
  // Per-call scratch space, reused across the words of one Encode.
  struct Scratch;

  explicit Tokenizer(Vocab vocab, PreTokenizer pre_tokenizer);
  absl::Status Init();

  // Returns the piece id of `text`, creating one above the vocab when needed.
  int32_t InternPiece(const std::string& text);
  const std::string& PieceText(int32_t piece) const;
  void EncodeText(std::string_view text, Scratch& scratch,
                  std::vector<int32_t>& out) const;
  void EncodeWord(std::string_view word, Scratch& scratch,
                  std::vector<int32_t>& out) const;
  void EmitPiece(int32_t piece, std::vector<int32_t>& out) const;

  Vocab vocab_;
  PreTokenizer pre_tokenizer_;
  // Llama 3 vocabularies emit a whole word directly when it is a token.
  bool ignore_merges_ = false;
  // Text -> piece id. Ids below vocab_size() are tokens (for duplicate texts
  // the last id wins, as in llama.cpp); ids above name merge operands and
  // results that are not tokens, kept in extra_pieces_.
  absl::flat_hash_map<std::string, int32_t> piece_ids_;
  std::vector<std::string> extra_pieces_;
  // Piece of the single byte-encoded byte b.
  std::array<int32_t, 256> byte_pieces_{};
  // (left piece << 32 | right piece) -> merge; the first listing of a pair wins.
  absl::flat_hash_map<uint64_t, MergeRule> merges_;
  // Tokens matched in raw text: all such ids, longest text first.
  std::vector<int32_t> special_ids_;
  std::vector<std::string> pieces_;  // TokenToPiece for every id
  std::vector<uint8_t> is_eog_;
  std::vector<int32_t> eog_ids_;
};

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
