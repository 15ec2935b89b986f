// MatMul: y[n, rows] = x[n, cols] · wᵀ. Two paths:
//  - quantized activations (Q8_0 / Q4_0 / Q4_1 weights, the default): x is
//    quantized once per call to BlockQ8A, then integer-dot tiles run over
//    cache blocks of weight rows × activation rows, threads splitting rows;
//  - reference precision (every other type, or quantize_activations=false):
//    weight rows are dequantized to f32 (8 at a time, per thread) and dotted
//    with each activation row in f32.
#include <algorithm>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu/block_q8a.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

// Rows per parallel work unit, and the cache block: a block of weight rows
// (≤ 64 × 720 B for the widest Q4_1 row here) stays in L1/L2 while up to
// kColBlock quantized activation rows stream past it.
constexpr int64_t kRowUnit = 16;
constexpr int64_t kRowBlock = 64;
constexpr int64_t kColBlock = 64;
// Below this many multiply-adds a call runs on the calling thread only: the
// hand-off to the pool costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 15;

void Parallel(ThreadPool* pool, int64_t n, int64_t min_chunk,
              const std::function<void(int, int64_t, int64_t)>& fn) {
  if (pool == nullptr || pool->num_threads() == 1 || n <= min_chunk) {
    if (n > 0) fn(0, 0, n);
    return;
  }
  pool->ParallelFor(n, min_chunk, fn);
}

QuantTileFn TileFor(const QuantKernels& k, gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ8_0:
      return k.tile_q8_0;
    case gguf::GgmlType::kQ4_0:
      return k.tile_q4_0;
    case gguf::GgmlType::kQ4_1:
      return k.tile_q4_1;
    default:
      return nullptr;
  }
}

void QuantizedMatMul(const WeightView& w, const float* x, int64_t n, float* y,
                     const QuantKernels& k, QuantTileFn tile, ThreadPool* pool) {
  const int64_t nb = w.cols / kQ8ABlock;
  // Grows to the largest batch seen on this thread and is then reused, so the
  // steady state allocates nothing.
  thread_local std::vector<BlockQ8A> xq;
  if (static_cast<int64_t>(xq.size()) < n * nb) xq.resize(n * nb);
  BlockQ8A* xq_data = xq.data();
  const bool parallel = w.rows * w.cols * n >= kMinParallelMacs;

  Parallel(parallel ? pool : nullptr, n, std::max<int64_t>(1, 8192 / w.cols),
           [&](int, int64_t begin, int64_t end) {
             for (int64_t i = begin; i < end; ++i) {
               k.quantize_row(x + i * w.cols, w.cols, xq_data + i * nb);
             }
           });

  const uint8_t* wbytes = static_cast<const uint8_t*>(w.data);
  const int64_t units = (w.rows + kRowUnit - 1) / kRowUnit;
  Parallel(parallel ? pool : nullptr, units, 1, [&](int, int64_t u0, int64_t u1) {
    const int64_t r_begin = u0 * kRowUnit;
    const int64_t r_end = std::min(w.rows, u1 * kRowUnit);
    for (int64_t rb = r_begin; rb < r_end; rb += kRowBlock) {
      const int64_t re = std::min(rb + kRowBlock, r_end);
      for (int64_t cb = 0; cb < n; cb += kColBlock) {
        const int64_t ce = std::min(cb + kColBlock, n);
        tile(wbytes + rb * w.row_bytes, w.row_bytes, re - rb, xq_data + cb * nb, ce - cb, nb,
             y + cb * w.rows + rb, w.rows);
      }
    }
  });
}

void F32MatMul(const WeightView& w, const float* x, int64_t n, float* y, const QuantKernels& k,
               ThreadPool* pool) {
  constexpr int64_t kRows = 8;
  const uint8_t* wbytes = static_cast<const uint8_t*>(w.data);
  const bool is_f32 = w.type == gguf::GgmlType::kF32;
  const int64_t units = (w.rows + kRows - 1) / kRows;
  const bool parallel = w.rows * w.cols * n >= kMinParallelMacs;
  Parallel(parallel ? pool : nullptr, units, 1, [&](int, int64_t u0, int64_t u1) {
    // Per thread: kRows dequantized weight rows.
    thread_local std::vector<float> wf;
    if (!is_f32 && static_cast<int64_t>(wf.size()) < kRows * w.cols) wf.resize(kRows * w.cols);
    const float* wrow[kRows];
    for (int64_t r0 = u0 * kRows; r0 < std::min(w.rows, u1 * kRows); r0 += kRows) {
      const int64_t rr = std::min(kRows, w.rows - r0);
      for (int64_t r = 0; r < rr; ++r) {
        const uint8_t* src = wbytes + (r0 + r) * w.row_bytes;
        if (is_f32) {
          wrow[r] = reinterpret_cast<const float*>(src);
        } else {
          DequantizeRowRef(w.type, src, w.cols, wf.data() + r * w.cols);
          wrow[r] = wf.data() + r * w.cols;
        }
      }
      for (int64_t c = 0; c < n; ++c) {
        for (int64_t r = 0; r < rr; ++r) {
          y[c * w.rows + r0 + r] = k.dot_f32(wrow[r], x + c * w.cols, w.cols);
        }
      }
    }
  });
}

}  // namespace

void MatMul(const WeightView& w, const float* x, int64_t n, float* y, const MatMulParams& params,
            ThreadPool* pool) {
  const int64_t block_elems = WeightBlockElems(w.type);
  CHECK(block_elems != 0, "MatMul: unsupported weight type %d", static_cast<int>(w.type));
  CHECK(w.cols % block_elems == 0, "MatMul: cols %d not a multiple of block size %d", w.cols,
        block_elems);
  CHECK(w.row_bytes >= w.cols / block_elems * WeightBlockBytes(w.type),
        "MatMul: row_bytes %d too small for %d cols", w.row_bytes, w.cols);
  CHECK(n >= 0 && w.rows >= 0, "MatMul: n %d rows %d", n, w.rows);
  if (n == 0 || w.rows == 0) return;
  const QuantKernels& k = QuantKernelsFor(params.isa);
  QuantTileFn tile = params.quantize_activations ? TileFor(k, w.type) : nullptr;
  if (tile != nullptr) {
    QuantizedMatMul(w, x, n, y, k, tile, pool);
  } else {
    F32MatMul(w, x, n, y, k, pool);
  }
}

}  // namespace tandem::kernels
