#include "engine/sampling/candidate_list.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/logging.h"

namespace tandem::sampling {
namespace {

// Smallest head sorted at once, and the range size below which selection
// just sorts: under this, nth_element's overhead dominates.
constexpr size_t kSortChunk = 64;

using Iter = std::vector<Candidate>::iterator;

inline Iter At(std::vector<Candidate>& v, size_t i) {
  return v.begin() + static_cast<std::ptrdiff_t>(i);
}

}  // namespace

void CandidateList::Reset(std::span<const float> logits) {
  items_.clear();
  num_sorted_ = 0;
  num_head_set_ = 0;
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
  const size_t target = std::min(items_.size(), std::max({n, 2 * num_sorted_, kSortChunk}));
  if (target < items_.size()) {
    std::nth_element(At(items_, num_sorted_), At(items_, target), items_.end(), CandidateBefore);
  }
  std::sort(At(items_, num_sorted_), At(items_, target), CandidateBefore);
  num_sorted_ = target;
  num_head_set_ = 0;
}

void CandidateList::KeepHead(size_t n) {
  CHECK(n <= std::max(num_sorted_, num_head_set_),
        "KeepHead(%zu) beyond the known canonical head (sorted %zu, selected %zu)", n,
        num_sorted_, num_head_set_);
  items_.resize(n);
  num_sorted_ = std::min(num_sorted_, n);
  num_head_set_ = 0;
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
  num_head_set_ = 0;
}

size_t CandidateList::FindMassCrossing(double target, MassCrossing mode) {
  const auto crossed = [&](double mass) {
    return mode == MassCrossing::kReaches ? mass >= target : mass > target;
  };
  num_head_set_ = 0;
  SortPrefix(kSortChunk);
  double mass = 0.0;
  for (size_t i = 0; i < num_sorted_; ++i) {
    mass += items_[i].value;
    if (crossed(mass)) {
      num_head_set_ = i + 1;
      return i;
    }
  }
  // Invariant: everything before lo precedes [lo, hi), which precedes
  // everything from hi on; `mass` is the mass before lo; the crossing, if
  // any, lies in [lo, hi).
  size_t lo = num_sorted_;
  size_t hi = items_.size();
  while (hi - lo > kSortChunk) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(At(items_, lo), At(items_, mid), At(items_, hi), CandidateBefore);
    double left = 0.0;
    for (size_t i = lo; i <= mid; ++i) left += items_[i].value;
    if (crossed(mass + left)) {
      hi = mid + 1;
    } else {
      mass += left;
      lo = mid + 1;
    }
  }
  std::sort(At(items_, lo), At(items_, hi), CandidateBefore);
  for (size_t i = lo; i < hi; ++i) {
    mass += items_[i].value;
    if (crossed(mass)) {
      num_head_set_ = i + 1;
      return i;
    }
  }
  if (hi < items_.size()) {
    // The halving step saw the crossing at hi - 1, but summing the range one
    // by one rounded differently and fell an ulp short: the crossing is hi - 1.
    num_head_set_ = hi;
    return hi - 1;
  }
  return items_.size();
}

double CandidateList::ToWeights() {
  const float max_value = MaxValue();
  double sum = 0.0;
  for (Candidate& c : items_) {
    c.value = std::exp(c.value - max_value);
    sum += c.value;
  }
  num_sorted_ = 0;
  num_head_set_ = 0;
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
