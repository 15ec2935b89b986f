// EmbeddingGather: one block per token; the block's threads stride over the
// row's elements, each decoding its element from the encoded row in global
// memory (quant_device.cuh), so no shared memory or barrier is needed.
#include "kernels/cuda/layers/embedding.cuh"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/primitives/quant_device.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

using gguf::GgmlType;

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

// table: [vocab_size rows, row_bytes apart]; token_ids: [gridDim.x];
// out: [gridDim.x, dim].
template <GgmlType kType>
__global__ void EmbeddingKernel(const uint8_t* __restrict__ table, int64_t vocab_size, int64_t dim,
                                int64_t row_bytes, const int32_t* __restrict__ token_ids,
                                float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int64_t id = token_ids[t];
  float* row_out = out + t * dim;
  if (id < 0 || id >= vocab_size) {
    for (int64_t e = threadIdx.x; e < dim; e += blockDim.x) row_out[e] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t* row = table + id * row_bytes;
  for (int64_t e = threadIdx.x; e < dim; e += blockDim.x) {
    row_out[e] = DequantElement<kType>(row, e);
  }
}

template <GgmlType kType>
absl::Status Launch(const kernels::WeightView& table, const int32_t* token_ids, int64_t num_tokens,
                    float* out, cudaStream_t stream) {
  // Whole warps, no more than the row needs.
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (table.cols + 31) / 32 * 32));
  TANDEM_LAUNCH(EmbeddingKernel<kType>, static_cast<unsigned>(num_tokens), threads, 0, stream,
                static_cast<const uint8_t*>(table.data), table.rows, table.cols, table.row_bytes,
                token_ids, out);
  return LaunchStatus("EmbeddingKernel");
}

}  // namespace

absl::Status EmbeddingGather(const kernels::WeightView& table, const int32_t* token_ids,
                             int64_t num_tokens, float* out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckDeviceWeight(table, "EmbeddingGather"));
  if (num_tokens < 0 || num_tokens > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("EmbeddingGather: num_tokens %d outside [0, %d]", num_tokens, kMaxGridX));
  }
  if (num_tokens == 0) return absl::OkStatus();
  switch (table.type) {
    case GgmlType::kF32:
      return Launch<GgmlType::kF32>(table, token_ids, num_tokens, out, stream);
    case GgmlType::kF16:
      return Launch<GgmlType::kF16>(table, token_ids, num_tokens, out, stream);
    case GgmlType::kBF16:
      return Launch<GgmlType::kBF16>(table, token_ids, num_tokens, out, stream);
    case GgmlType::kQ8_0:
      return Launch<GgmlType::kQ8_0>(table, token_ids, num_tokens, out, stream);
    case GgmlType::kQ4_0:
      return Launch<GgmlType::kQ4_0>(table, token_ids, num_tokens, out, stream);
    default:
      return Launch<GgmlType::kQ4_1>(table, token_ids, num_tokens, out, stream);
  }
}

}  // namespace tandem::cuda
