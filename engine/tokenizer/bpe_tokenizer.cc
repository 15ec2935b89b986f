#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/tokenizer/byte_unicode.h"

namespace tandem::tokenizer {
namespace {

// Texts llama.cpp treats as ending a turn (special_eog_ids): end-of-turn
// tokens plus the FIM pad / repo / file-separator tokens it detects by name.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",     "<|im_end|>",      "<|end|>",         "<|return|>",
    "<|call|>",       "<end_of_turn>",   "<|endoftext|>",   "<|eom_id|>",
    "<EOT>",          "_<EOT>",          "<|end_of_text|>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
    // FIM pad
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
    // FIM repo
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
    // FIM file separator
    "<|file_sep|>",
};

// Debian's Abseil has its own string_view type; hash lookups need it.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

// A raw-text span or an already matched special token.
struct Fragment {
  int32_t token;  // kNoToken for raw text
  size_t offset;
  size_t length;
};

}  // namespace

struct Tokenizer::Scratch {
  struct Symbol {
    int32_t piece;
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_piece;
    int32_t right_piece;
    int32_t result;
    // Orders the priority queue: lowest rank on top, then leftmost.
    bool operator<(const Bigram& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> queue;  // a heap, via std::push_heap / pop_heap
  std::string encoded;
};

Tokenizer::Tokenizer(Vocab vocab, PreTokenizer pre_tokenizer)
    : vocab_(std::move(vocab)), pre_tokenizer_(pre_tokenizer) {}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  RETURN_IF_ERROR(vocab.Validate());
  if (vocab.model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat(
        "tokenizer model \"", vocab.model,
        "\" is not supported (only \"gpt2\", byte-level BPE)"));
  }
  ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer, PreTokenizer::Create(vocab.pre));
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(vocab), pre_tokenizer));
  RETURN_IF_ERROR(tokenizer->Init());
  return tokenizer;
}

int32_t Tokenizer::InternPiece(const std::string& text) {
  auto [it, inserted] = piece_ids_.try_emplace(
      text, vocab_.size() + static_cast<int32_t>(extra_pieces_.size()));
  if (inserted) extra_pieces_.push_back(text);
  return it->second;
}

const std::string& Tokenizer::PieceText(int32_t piece) const {
  return piece < vocab_.size() ? vocab_.tokens[piece]
                               : extra_pieces_[piece - vocab_.size()];
}

absl::Status Tokenizer::Init() {
  const int32_t n = vocab_.size();
  ignore_merges_ = pre_tokenizer_.kind() == PreTokenizerKind::kLlama3;

  piece_ids_.reserve(n + 1024);
  for (int32_t id = 0; id < n; ++id) piece_ids_[vocab_.tokens[id]] = id;

  // End-of-generation tokens, forced to control like llama.cpp does.
  is_eog_.assign(n, 0);
  for (std::string_view text : kEndOfGenerationTexts) {
    auto it = piece_ids_.find(AbslView(text));
    if (it == piece_ids_.end()) continue;
    is_eog_[it->second] = 1;
    vocab_.types[it->second] = TokenType::kControl;
  }
  if (vocab_.eos_id != kNoToken) is_eog_[vocab_.eos_id] = 1;
  for (int32_t id = 0; id < n; ++id) {
    if (is_eog_[id]) eog_ids_.push_back(id);
  }

  std::string encoded;
  for (int b = 0; b < 256; ++b) {
    encoded.clear();
    const char byte = static_cast<char>(b);
    AppendByteEncoded(std::string_view(&byte, 1), encoded);
    byte_pieces_[b] = InternPiece(encoded);
  }

  merges_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& merge = vocab_.merges[rank];
    const size_t space = merge.find(' ', 1);  // Validate() guarantees one
    const std::string left = merge.substr(0, space);
    const std::string right = merge.substr(space + 1);
    const int32_t left_piece = InternPiece(left);
    const int32_t right_piece = InternPiece(right);
    const int32_t result = InternPiece(left + right);
    merges_.try_emplace(PairKey(left_piece, right_piece),
                        MergeRule{static_cast<int32_t>(rank), result});
  }

  pieces_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    switch (vocab_.types[id]) {
      case TokenType::kNormal:
        pieces_[id] = ByteDecode(vocab_.tokens[id]);
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        pieces_[id] = vocab_.tokens[id];
        if (!vocab_.tokens[id].empty()) special_ids_.push_back(id);
        break;
      default:
        break;  // unused / byte / undefined decode to nothing
    }
  }
  // Longest first; ties by id so the order never depends on the sort.
  std::sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    const size_t la = vocab_.tokens[a].size(), lb = vocab_.tokens[b].size();
    return la != lb ? la > lb : a < b;
  });
  return absl::OkStatus();
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return TokenType::kUndefined;
  return vocab_.types[id];
}

bool Tokenizer::IsSkippedWhenSkippingSpecial(int32_t id) const {
  const TokenType type = token_type(id);
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id >= 0 && id < vocab_.size() && is_eog_[id];
}

const std::string& Tokenizer::TokenToPiece(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  if (id < 0 || id >= vocab_.size()) return *kEmpty;
  return pieces_[id];
}

absl::StatusOr<int32_t> Tokenizer::TokenId(std::string_view piece) const {
  auto it = piece_ids_.find(AbslView(piece));
  if (it == piece_ids_.end() || it->second >= vocab_.size()) {
    return absl::NotFoundError(absl::StrCat("no token has the text \"", AbslView(piece),
                                            "\" (vocab of ", vocab_.size(), ")"));
  }
  return it->second;
}

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                              bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is out of range [0, ", vocab_.size(), ")"));
    }
    if (skip_special && IsSkippedWhenSkippingSpecial(id)) continue;
    out += pieces_[id];
  }
  return out;
}

bool Tokenizer::HasControlText(std::string_view text) const {
  for (int32_t id : special_ids_) {
    if (vocab_.types[id] == TokenType::kUserDefined) continue;
    if (text.find(vocab_.tokens[id]) != std::string_view::npos) return true;
  }
  return false;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special,
                                       std::span<const ByteRange> literal) const {
  // Whether [begin, begin + length) overlaps a literal range (they are
  // sorted and disjoint: the first one ending after `begin` decides).
  auto in_literal = [literal](size_t begin, size_t length) {
    auto r = std::partition_point(literal.begin(), literal.end(),
                                  [begin](const ByteRange& x) { return x.end <= begin; });
    return r != literal.end() && r->begin < begin + length;
  };
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);

  // Split out special tokens: each special text, longest first, cuts every
  // remaining raw fragment at all its (non-overlapping) occurrences.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    if (!parse_special && vocab_.types[id] != TokenType::kUserDefined) continue;
    const std::string& special = vocab_.tokens[id];
    bool found = false;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view raw = text.substr(fragment.offset, fragment.length);
      size_t start = 0;  // the raw text not yet emitted
      for (size_t from = 0, match;
           (match = raw.find(special, from)) != std::string_view::npos;) {
        if (vocab_.types[id] != TokenType::kUserDefined &&
            in_literal(fragment.offset + match, special.size())) {
          from = match + 1;  // plain text here; a later occurrence may count
          continue;
        }
        found = true;
        if (match > start) {
          next.push_back({kNoToken, fragment.offset + start, match - start});
        }
        next.push_back({id, 0, 0});
        start = from = match + special.size();
      }
      if (start < raw.size()) {
        next.push_back({kNoToken, fragment.offset + start, raw.size() - start});
      }
    }
    if (found) fragments.swap(next);
  }

  Scratch scratch;
  for (const Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      out.push_back(fragment.token);
    } else {
      EncodeText(text.substr(fragment.offset, fragment.length), scratch, out);
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void Tokenizer::EncodeText(std::string_view text, Scratch& scratch,
                           std::vector<int32_t>& out) const {
  for (std::string_view word : pre_tokenizer_.Split(text)) {
    EncodeWord(word, scratch, out);
  }
}

void Tokenizer::EmitPiece(int32_t piece, std::vector<int32_t>& out) const {
  if (piece < vocab_.size()) {
    out.push_back(piece);
    return;
  }
  // Not a token: fall back to the single characters of its text that are
  // tokens, as llama.cpp does (a complete byte-level vocab never gets here).
  for (char c : PieceText(piece)) {
    auto it = piece_ids_.find(absl::string_view(&c, 1));
    if (it != piece_ids_.end() && it->second < vocab_.size()) out.push_back(it->second);
  }
}

void Tokenizer::EncodeWord(std::string_view word, Scratch& scratch,
                           std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    EmitPiece(byte_pieces_[static_cast<uint8_t>(word[0])], out);
    return;
  }
  if (ignore_merges_) {
    scratch.encoded.clear();
    AppendByteEncoded(word, scratch.encoded);
    auto it = piece_ids_.find(scratch.encoded);
    if (it != piece_ids_.end() && it->second < vocab_.size()) {
      out.push_back(it->second);
      return;
    }
  }

  auto& symbols = scratch.symbols;
  auto& queue = scratch.queue;
  symbols.clear();
  queue.clear();
  const int32_t num_symbols = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < num_symbols; ++i) {
    symbols.push_back({byte_pieces_[static_cast<uint8_t>(word[i])], i - 1,
                       i + 1 < num_symbols ? i + 1 : -1});
  }
  const auto add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    auto it = merges_.find(PairKey(symbols[left].piece, symbols[right].piece));
    if (it == merges_.end()) return;
    queue.push_back({it->second.rank, left, right, symbols[left].piece,
                     symbols[right].piece, it->second.result});
    std::push_heap(queue.begin(), queue.end());
  };
  for (int32_t i = 1; i < num_symbols; ++i) add_bigram(i - 1, i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Scratch::Bigram bigram = queue.back();
    queue.pop_back();
    Scratch::Symbol& left = symbols[bigram.left];
    Scratch::Symbol& right = symbols[bigram.right];
    // Stale when either side has merged since (pieces only ever grow).
    if (left.piece != bigram.left_piece || right.piece != bigram.right_piece ||
        left.next != bigram.right) {
      continue;
    }
    left.piece = bigram.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    right.piece = -1;
    add_bigram(left.prev, bigram.left);
    add_bigram(bigram.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) EmitPiece(symbols[i].piece, out);
}

}  // namespace tandem::tokenizer
