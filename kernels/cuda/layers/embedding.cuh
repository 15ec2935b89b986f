// Embedding gather on the GPU: the f32 rows of a token-embedding matrix for a
// batch of token ids, dequantized on the fly.
#ifndef TANDEM_KERNELS_CUDA_LAYERS_EMBEDDING_CUH_
#define TANDEM_KERNELS_CUDA_LAYERS_EMBEDDING_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/kernels.h"

namespace tandem::cuda {

// out[t, :] = row token_ids[t] of `table`, dequantized to f32 with the bits
// of kernels::DequantizeRowRef. Runs asynchronously on `stream`.
//   table: vocab_size = table.rows rows of dim = table.cols elements, data in
//          device memory (table.packed is not read); type F32, F16, BF16,
//          Q8_0, Q4_0 or Q4_1.
//   token_ids: [num_tokens] in device memory.
//   out: [num_tokens, table.cols] in device memory.
// A token id outside [0, table.rows) yields a row of NaN rather than a read
// outside the table (a kernel cannot return an error; NaN shows downstream).
// INVALID_ARGUMENT for another weight type, cols not a multiple of the
// type's block, row_bytes too small for cols, or num_tokens outside
// [0, 2^31); INTERNAL when the launch fails.
absl::Status EmbeddingGather(const kernels::WeightView& table, const int32_t* token_ids,
                             int64_t num_tokens, float* out, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_LAYERS_EMBEDDING_CUH_
