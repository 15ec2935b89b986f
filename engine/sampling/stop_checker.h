// StopChecker: finds stop strings in a sequence's streamed text and decides
// how much of the text is safe to stream to the client now.
//
// Text that might be the beginning of a stop string is held back until the
// next chunk settles it; text after the earliest match is never emitted, and
// neither is the stop string itself (OpenAI / vLLM semantics). Matches are
// found across chunk boundaries. With several stop strings the earliest match
// in the text wins.
//
// UTF-8 safety: text is split only at chunk boundaries and at the start of a
// (possible) stop-string match. Stop strings are valid UTF-8
// (ValidateSamplingParams), so a match can only start at a character boundary
// of valid UTF-8 text; no multibyte character is ever cut.
//
// Thread-safety: none; owned by one sequence's state.
#ifndef TANDEM_ENGINE_SAMPLING_STOP_CHECKER_H_
#define TANDEM_ENGINE_SAMPLING_STOP_CHECKER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::sampling {

class StopChecker {
 public:
  struct Update {
    std::string emit;      // text to stream now (may be empty)
    bool stopped = false;  // a stop string matched; `emit` ends right before it
  };

  // `stops` must not contain empty strings (CHECK; ValidateSamplingParams
  // rejects them). An empty list makes the checker a pass-through.
  explicit StopChecker(std::vector<std::string> stops);

  // Feeds the next chunk of decoded text. Returns what may be emitted now,
  // holding back the longest suffix that is a proper prefix of some stop
  // string. Once stopped, every later call returns {"", true}.
  Update Append(std::string_view new_text);

  // At the end of generation (max_tokens, EOS): returns the held-back text,
  // which can no longer become a stop string, and clears it. Returns "" after
  // a stop.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // Bytes currently held back (for tests and metrics).
  size_t num_held() const { return held_.size(); }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of a stop.
  size_t LongestPartialMatch() const;

  std::vector<std::string> stops_;
  std::string held_;  // received but not yet emitted
  bool stopped_ = false;
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_STOP_CHECKER_H_
