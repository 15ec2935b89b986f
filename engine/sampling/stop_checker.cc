#include "engine/sampling/stop_checker.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"

namespace tandem::sampling {

StopChecker::StopChecker(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    CHECK(!stops_[i].empty(), "stop string %zu is empty", i);
  }
}

StopChecker::Update StopChecker::Append(std::string_view new_text) {
  if (stopped_) return {"", true};
  held_.append(new_text);
  // Every match starts inside held_: emitted text was, by construction, not
  // the start of any stop string, even together with what followed it.
  size_t earliest = std::string::npos;
  for (const std::string& stop : stops_) {
    earliest = std::min(earliest, held_.find(stop));
  }
  Update update;
  if (earliest != std::string::npos) {
    held_.resize(earliest);
    update.emit = std::move(held_);
    update.stopped = true;
    held_.clear();
    stopped_ = true;
    return update;
  }
  const size_t keep = LongestPartialMatch();
  update.emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return update;
}

std::string StopChecker::Flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

size_t StopChecker::LongestPartialMatch() const {
  const std::string_view text(held_);
  size_t best = 0;
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, text.size());
    for (size_t len = longest; len > best; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace tandem::sampling
