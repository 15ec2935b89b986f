// Strong integer ids: distinct types for sequence, request and block ids so
// they cannot be mixed up, with the layout of the underlying integer (a
// std::vector<BlockId> can be handed to kernels as int32_t*).
#ifndef TANDEM_COMMON_STRONG_ID_H_
#define TANDEM_COMMON_STRONG_ID_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <span>

namespace tandem {

template <typename Tag, typename T>
class StrongId {
 public:
  using ValueType = T;
  constexpr StrongId() = default;
  constexpr explicit StrongId(T value) : value_(value) {}
  constexpr T value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }

 private:
  T value_ = -1;
};

struct SeqIdTag {};
struct RequestIdTag {};
struct BlockIdTag {};

// One decoding sequence (a request has n >= 1 sequences, or one per beam).
using SeqId = StrongId<SeqIdTag, int64_t>;
// One client request.
using RequestId = StrongId<RequestIdTag, int64_t>;
// Index of one KV block in a worker group's block pool.
using BlockId = StrongId<BlockIdTag, int32_t>;
static_assert(sizeof(BlockId) == sizeof(int32_t));

// Views block ids as the plain integers kernels take.
inline std::span<const int32_t> AsInts(std::span<const BlockId> ids) {
  return {reinterpret_cast<const int32_t*>(ids.data()), ids.size()};
}

}  // namespace tandem

template <typename Tag, typename T>
struct std::hash<tandem::StrongId<Tag, T>> {
  size_t operator()(tandem::StrongId<Tag, T> id) const { return std::hash<T>()(id.value()); }
};

#endif  // TANDEM_COMMON_STRONG_ID_H_
