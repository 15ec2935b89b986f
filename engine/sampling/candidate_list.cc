#include "engine/sampling/candidate_list.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/logging.h"

namespace tandem::sampling {
namespace {
// Smallest head SortPrefix sorts at once: below this, nth_element's overhead
// dominates and a second call would likely follow.
constexpr size_t kMinSortChunk = 64;
}  // namespace

void CandidateList::Reset(std::span<const float> logits) {
  items_.clear();
  num_sorted_ = 0;
  constexpr float kMax = std::numeric_limits<float>::max();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v) || v == kNegInf) continue;
    items_.push_back({static_cast<int32_t>(i), std::min(v, kMax)});
  }
}

void CandidateList::SortPrefix(size_t n) {
  n = std::min(n, items_.size());
  if (n <= num_sorted_) return;
  const size_t target = std::min(items_.size(), std::max({n, 2 * num_sorted_, kMinSortChunk}));
  auto begin = items_.begin() + static_cast<std::ptrdiff_t>(num_sorted_);
  auto mid = items_.begin() + static_cast<std::ptrdiff_t>(target);
  if (mid != items_.end()) std::nth_element(begin, mid, items_.end(), CandidateBefore);
  std::sort(begin, mid, CandidateBefore);
  num_sorted_ = target;
}

void CandidateList::TruncateSorted(size_t n) {
  CHECK(n <= num_sorted_, "truncation to %zu exceeds the sorted head of %zu", n, num_sorted_);
  items_.resize(n);
  num_sorted_ = n;
}

void CandidateList::KeepAtLeast(float threshold) {
  size_t out = 0;
  size_t sorted_out = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].value >= threshold) {
      items_[out++] = items_[i];
      if (i < num_sorted_) sorted_out = out;
    }
  }
  items_.resize(out);
  // A dropped head element means every later element is dropped too (they are
  // all lower), so the survivors of the head are still a prefix.
  num_sorted_ = sorted_out;
}

float CandidateList::KthLargestValue(size_t k) {
  CHECK(k >= 1 && k <= items_.size(), "k %zu is out of range [1, %zu]", k, items_.size());
  if (k <= num_sorted_) return items_[k - 1].value;
  auto kth = items_.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(items_.begin() + static_cast<std::ptrdiff_t>(num_sorted_), kth, items_.end(),
                   CandidateBefore);
  // nth_element leaves [num_sorted_, k-1) unordered, so only the old head
  // stays sorted; it is untouched, so keep it.
  return kth->value;
}

double CandidateList::ToWeights() {
  const float max_value = MaxValue();
  double sum = 0.0;
  for (Candidate& c : items_) {
    c.value = std::exp(c.value - max_value);
    sum += c.value;
  }
  num_sorted_ = 0;
  return sum;
}

double CandidateList::Sum() const {
  double sum = 0.0;
  for (const Candidate& c : items_) sum += c.value;
  return sum;
}

float CandidateList::MaxValue() const {
  CHECK(!items_.empty(), "MaxValue of an empty candidate list");
  if (num_sorted_ > 0) return items_[0].value;
  float m = items_[0].value;
  for (const Candidate& c : items_) m = std::max(m, c.value);
  return m;
}

}  // namespace tandem::sampling
