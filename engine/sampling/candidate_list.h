// CandidateList: the tokens of one row still in play after masking and
// truncation, with a lazily sorted prefix. Top-k, top-p and the sampling draw
// only ever look at the highest-valued candidates, so instead of sorting the
// whole vocabulary the list sorts just enough of its head (nth_element, then
// sort of that slice), growing the head geometrically when more is needed.
//
// The canonical order is (value descending, token ascending): a strict total
// order, so every sorted prefix is fully determined by the row's data,
// whatever algorithm or thread produced it.
//
// Thread-safety: none; one owner (a Sampler keeps one per worker thread).
#ifndef TANDEM_ENGINE_SAMPLING_CANDIDATE_LIST_H_
#define TANDEM_ENGINE_SAMPLING_CANDIDATE_LIST_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::sampling {

struct Candidate {
  int32_t token;
  // A logit before ToWeights(); an unnormalized probability after. Never NaN.
  float value;
};

// True when `a` precedes `b` in the canonical order.
inline bool CandidateBefore(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.token < b.token);
}

class CandidateList {
 public:
  CandidateList() = default;

  // Replaces the contents with every token of `logits` ([vocab_size]) whose
  // logit is neither -inf nor NaN, in id order. +inf is clamped to the largest
  // finite float so that softmax stays defined. May leave the list empty.
  void Reset(std::span<const float> logits);

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const Candidate& operator[](size_t i) const { return items_[i]; }
  std::span<const Candidate> items() const { return items_; }

  // Length of the head known to be in canonical order, every element of it
  // preceding every element after it.
  size_t num_sorted() const { return num_sorted_; }

  // Extends the sorted head to at least min(n, size()) elements. Grows by at
  // least doubling so repeated small extensions cost O(size) each, not more.
  void SortPrefix(size_t n);

  // Keeps the first `n` candidates of the canonical order. Requires
  // n <= num_sorted() (CHECK).
  void TruncateSorted(size_t n);

  // Keeps the candidates with value >= threshold, preserving relative order
  // (and so the sorted head, shortened to what survives).
  void KeepAtLeast(float threshold);

  // Returns the k-th value (1-based) in canonical order without sorting all of
  // the list; 1 <= k <= size() (CHECK). Reorders the unsorted tail only.
  float KthLargestValue(size_t k);

  // Converts logits to weights exp(value - max_value), so the best candidate
  // has weight 1, and returns their sum (>= 1). Resets the sorted head: exp is
  // monotonic, but distinct logits may round to equal weights, which the
  // token tie-break may then order differently. Requires a non-empty list
  // (CHECK).
  double ToWeights();

  // Sum of the values, accumulated in double in list order.
  double Sum() const;
  // Largest value; requires a non-empty list (CHECK).
  float MaxValue() const;

 private:
  std::vector<Candidate> items_;
  size_t num_sorted_ = 0;
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_CANDIDATE_LIST_H_
