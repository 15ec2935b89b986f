// MatMul: y[n, rows] = x[n, cols] · wᵀ. Two paths:
//  - quantized activations (Q8_0 / Q4_0 / Q4_1 weights, the default): x is
//    quantized once per call to BlockQ8A, then threads split the weight rows
//    (of all matrices, for MatMulMany) and run the ISA's integer-dot tile on
//    their range, against every activation row. A batch of at most
//    max_packed_x rows reads a matrix's packed copy (WeightView::packed)
//    when it has one and the ISA has packed tiles;
//  - reference precision (every other type, or quantize_activations=false):
//    weight rows are dequantized to f32 (8 at a time, per thread) and dotted
//    with each activation row in f32.
#include <algorithm>
#include <span>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu/block_q8a.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cpu/packed_rows16.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

// Rows per parallel work unit. Each thread hands its whole contiguous row
// range to the tile function, which does its own cache blocking.
// A multiple of kPackedRows, so that every unit starts a packed group.
constexpr int64_t kRowUnit = 16;
static_assert(kRowUnit % kPackedRows == 0);
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

// ys[i][n, ws[i].rows] = x · ws[i]ᵀ for matrices sharing cols: x is quantized
// once, then the union of all rows is split across threads in one loop.
// tiles[i] is the tile function of ws[i]; a matrix with a packed copy runs
// the packed tile instead when n is small enough.
void QuantizedMatMulMany(std::span<const WeightView> ws, std::span<const QuantTileFn> tiles,
                         const float* x, int64_t n, std::span<float* const> ys,
                         const QuantKernels& k, ThreadPool* pool) {
  PackedTileFn packed[8] = {};
  if (n <= k.max_packed_x) {
    for (size_t i = 0; i < ws.size() && i < 8; ++i) {
      if (ws[i].packed != nullptr) packed[i] = PackedTileForType(k, ws[i].type);
    }
  }
  const int64_t cols = ws[0].cols;
  const int64_t nb = cols / kQ8ABlock;
  // Grows to the largest batch seen on this thread and is then reused, so the
  // steady state allocates nothing.
  thread_local std::vector<BlockQ8A> xq;
  if (static_cast<int64_t>(xq.size()) < n * nb) xq.resize(n * nb);
  BlockQ8A* xq_data = xq.data();
  int64_t total_rows = 0, units = 0;
  // First unit of each matrix, and one past the last.
  int64_t unit_begin[8 + 1];
  CHECK(ws.size() <= 8, "MatMulMany: %d matrices, at most 8", ws.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    unit_begin[i] = units;
    units += (ws[i].rows + kRowUnit - 1) / kRowUnit;
    total_rows += ws[i].rows;
  }
  unit_begin[ws.size()] = units;
  const bool parallel = total_rows * cols * n >= kMinParallelMacs;

  Parallel(parallel ? pool : nullptr, n, std::max<int64_t>(1, 8192 / cols),
           [&](int, int64_t begin, int64_t end) {
             for (int64_t i = begin; i < end; ++i) {
               k.quantize_row(x + i * cols, cols, xq_data + i * nb);
             }
           });

  Parallel(parallel ? pool : nullptr, units, 1, [&](int, int64_t u0, int64_t u1) {
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t a = std::max(u0, unit_begin[i]), b = std::min(u1, unit_begin[i + 1]);
      if (a >= b) continue;
      const WeightView& w = ws[i];
      const int64_t r_begin = (a - unit_begin[i]) * kRowUnit;
      const int64_t r_end = std::min(w.rows, (b - unit_begin[i]) * kRowUnit);
      if (packed[i] != nullptr) {
        const uint8_t* groups = static_cast<const uint8_t*>(w.packed) +
                                r_begin / kPackedRows * nb * PackedBlockBytes(w.type);
        packed[i](groups, r_end - r_begin, xq_data, n, nb, ys[i] + r_begin, w.rows);
        continue;
      }
      tiles[i](static_cast<const uint8_t*>(w.data) + r_begin * w.row_bytes, w.row_bytes,
               r_end - r_begin, xq_data, n, nb, ys[i] + r_begin, w.rows);
    }
  });
}

void CheckWeight(const WeightView& w, int64_t n) {
  const int64_t block_elems = WeightBlockElems(w.type);
  CHECK(block_elems != 0, "MatMul: unsupported weight type %d", static_cast<int>(w.type));
  CHECK(w.cols % block_elems == 0, "MatMul: cols %d not a multiple of block size %d", w.cols,
        block_elems);
  CHECK(w.row_bytes >= w.cols / block_elems * WeightBlockBytes(w.type),
        "MatMul: row_bytes %d too small for %d cols", w.row_bytes, w.cols);
  CHECK(n >= 0 && w.rows >= 0, "MatMul: n %d rows %d", n, w.rows);
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
      // Each weight row against the activation rows three at a time where
      // the ISA can (same bits as one at a time).
      for (int64_t r = 0; r < rr; ++r) {
        int64_t c = 0;
        if (k.dot_f32_x3 != nullptr) {
          for (; c + 3 <= n; c += 3) {
            float out[3];
            k.dot_f32_x3(wrow[r], x + c * w.cols, w.cols, w.cols, out);
            for (int j = 0; j < 3; ++j) y[(c + j) * w.rows + r0 + r] = out[j];
          }
        }
        for (; c < n; ++c) y[c * w.rows + r0 + r] = k.dot_f32(wrow[r], x + c * w.cols, w.cols);
      }
    }
  });
}

}  // namespace

void MatMul(const WeightView& w, const float* x, int64_t n, float* y, const MatMulParams& params,
            ThreadPool* pool) {
  CheckWeight(w, n);
  if (n == 0 || w.rows == 0) return;
  const QuantKernels& k = QuantKernelsFor(params.isa);
  QuantTileFn tile = params.quantize_activations ? TileFor(k, w.type) : nullptr;
  if (tile != nullptr) {
    QuantizedMatMulMany({&w, 1}, {&tile, 1}, x, n, {&y, 1}, k, pool);
  } else {
    F32MatMul(w, x, n, y, k, pool);
  }
}

void MatMulMany(std::span<const WeightView> ws, const float* x, int64_t n,
                std::span<float* const> ys, const MatMulParams& params, ThreadPool* pool) {
  CHECK(ws.size() == ys.size(), "MatMulMany: %d matrices but %d outputs", ws.size(), ys.size());
  if (ws.empty()) return;
  const QuantKernels& k = QuantKernelsFor(params.isa);
  QuantTileFn tiles[8];
  bool fused = params.quantize_activations && ws.size() <= 8;
  for (size_t i = 0; i < ws.size(); ++i) {
    CheckWeight(ws[i], n);
    CHECK(ws[i].cols == ws[0].cols, "MatMulMany: matrix %d has %d cols, matrix 0 has %d", i,
          ws[i].cols, ws[0].cols);
    if (fused) tiles[i] = TileFor(k, ws[i].type);
    fused = fused && tiles[i] != nullptr;
  }
  if (!fused) {
    for (size_t i = 0; i < ws.size(); ++i) MatMul(ws[i], x, n, ys[i], params, pool);
    return;
  }
  if (n == 0) return;
  QuantizedMatMulMany(ws, {tiles, ws.size()}, x, n, ys, k, pool);
}

}  // namespace tandem::kernels
