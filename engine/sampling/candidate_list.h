// CandidateList: the tokens of one row still in play after masking and
// truncation. Top-p and the sampling draw only need the position in the
// canonical order where the running probability mass crosses a target; the
// list finds it with a mass-weighted quickselect in O(size) expected time
// instead of sorting the vocabulary.
//
// The canonical order is (value descending, token ascending): a strict total
// order, so every answer is fully determined by the row's data, whatever
// algorithm or thread produced it.
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

// How FindMassCrossing compares the running mass with its target.
enum class MassCrossing {
  kReaches,  // running mass >= target (top-p: the candidate that completes the nucleus)
  kExceeds,  // running mass > target (inverse CDF: u * total falls inside this candidate)
};

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

  // Length of the head known to be in canonical order (each element of it
  // preceding every later element).
  size_t num_sorted() const { return num_sorted_; }

  // Extends the sorted head to at least min(n, size()) elements, growing it at
  // least geometrically so repeated small extensions stay O(size) each.
  void SortPrefix(size_t n);

  // Keeps the first n candidates of the canonical order. The first n items
  // must already be those (as a set): n <= num_sorted(), or n - 1 is what the
  // last FindMassCrossing returned (CHECK). Items stay in their positions.
  void KeepHead(size_t n);

  // Keeps the candidates with value >= threshold, preserving relative order
  // (and so the sorted head, shortened to what survives).
  void KeepAtLeast(float threshold);

  // Walks the candidates in canonical order accumulating value (in double),
  // and returns the position of the first one at which the running mass
  // crosses `target` as `mode` says; size() if it never does. On return the
  // items [0, result] are the first result+1 of the canonical order (as a
  // set) and items[result] is the (result+1)-th. Expected O(size): it sorts a
  // small head first (peaked distributions usually end there), then narrows
  // the rest by halving with nth_element.
  size_t FindMassCrossing(double target, MassCrossing mode);

  // Converts logits to weights exp(value - max_value), so the best candidate
  // has weight 1, and returns their sum (>= 1). Forgets the sorted head: exp
  // is monotonic, but distinct logits may round to equal weights, which the
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
  // Length of a head known to be the canonical first elements as a set, from
  // the last FindMassCrossing; >= num_sorted_ is not implied.
  size_t num_head_set_ = 0;
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_CANDIDATE_LIST_H_
