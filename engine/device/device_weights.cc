#include "engine/device/device_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/gguf/dequantize.h"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/quant_formats.h"

namespace tandem::device {
namespace {

using gguf::GgmlType;

bool IsQuantized(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 ||
         type == GgmlType::kF16;
}

// Bytes of one row of `cols` elements of `type`.
int64_t RowBytes(GgmlType type, int64_t cols) {
  const gguf::GgmlTypeTraits& t = gguf::TypeTraits(type);
  return cols / t.block_size * t.type_size;
}

// Row `r` of `src` in the device type `dst_type`, appended to `out`.
absl::Status ConvertRow(const kernels::WeightView& src, int64_t r, GgmlType dst_type,
                        std::vector<float>& f32_row, std::vector<uint8_t>& out) {
  const auto* row = static_cast<const uint8_t*>(src.data) + r * src.row_bytes;
  if (dst_type == src.type) {
    out.insert(out.end(), row, row + RowBytes(src.type, src.cols));
    return absl::OkStatus();
  }
  f32_row.resize(src.cols);
  RETURN_IF_ERROR(gguf::DequantizeRow(src.type, row, src.cols, f32_row.data()));
  if (dst_type == GgmlType::kF32) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(f32_row.data());
    out.insert(out.end(), bytes, bytes + src.cols * sizeof(float));
    return absl::OkStatus();
  }
  for (float x : f32_row) {  // BF16, round to nearest even
    const uint16_t b = gguf::Fp32ToBf16(x);
    out.push_back(static_cast<uint8_t>(b & 0xFF));
    out.push_back(static_cast<uint8_t>(b >> 8));
  }
  return absl::OkStatus();
}

// Converts and uploads one matrix, a chunk of rows at a time so that host
// staging stays small.
absl::StatusOr<DeviceMatrix> UploadMatrix(const kernels::WeightView& src, CudaWeights mode,
                                          const std::string& name, cudaStream_t stream) {
  const GgmlType type = DeviceTypeOf(src.type, mode);
  const int64_t row_bytes = RowBytes(type, src.cols);
  DeviceMatrix m;
  ASSIGN_OR_RETURN(m.buffer, cuda::DeviceBuffer::Allocate(row_bytes * src.rows, name));
  m.view = kernels::WeightView{type, m.buffer.data(), src.rows, src.cols, row_bytes, nullptr};
  constexpr int64_t kChunkBytes = 16 << 20;
  const int64_t chunk_rows = std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, row_bytes));
  std::vector<float> f32_row;
  std::vector<uint8_t> staging;
  for (int64_t first = 0; first < src.rows; first += chunk_rows) {
    const int64_t last = std::min(src.rows, first + chunk_rows);
    staging.clear();
    for (int64_t r = first; r < last; ++r) {
      RETURN_IF_ERROR(ConvertRow(src, r, type, f32_row, staging));
    }
    RETURN_IF_ERROR(m.buffer.Upload(staging.data(), static_cast<int64_t>(staging.size()),
                                    first * row_bytes, stream));
    // The staging vector is reused: the copy must be done with it.
    RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "weight upload"));
  }
  return m;
}

absl::StatusOr<cuda::DeviceBuffer> UploadVector(const std::vector<float>& v,
                                                const std::string& name, cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(float));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::Allocate(bytes, name));
  RETURN_IF_ERROR(buffer.Upload(v.data(), bytes, 0, stream));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "weight upload"));
  return buffer;
}

absl::StatusOr<DeviceLayer> UploadLayer(const model::LayerWeights& w, int32_t layer,
                                        CudaWeights mode, cudaStream_t stream) {
  const std::string prefix = absl::StrFormat("blk.%d.", layer);
  DeviceLayer d;
  ASSIGN_OR_RETURN(d.attn_norm, UploadVector(w.attn_norm, prefix + "attn_norm", stream));
  ASSIGN_OR_RETURN(d.ffn_norm, UploadVector(w.ffn_norm, prefix + "ffn_norm", stream));
  const std::pair<const kernels::WeightView*, DeviceMatrix*> matrices[] = {
      {&w.wq, &d.wq},         {&w.wk, &d.wk},     {&w.wv, &d.wv},        {&w.wo, &d.wo},
      {&w.w_gate, &d.w_gate}, {&w.w_up, &d.w_up}, {&w.w_down, &d.w_down}};
  const char* names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                         "ffn_down"};
  for (size_t i = 0; i < std::size(matrices); ++i) {
    ASSIGN_OR_RETURN(*matrices[i].second,
                     UploadMatrix(*matrices[i].first, mode, prefix + names[i], stream));
  }
  return d;
}

}  // namespace

GgmlType DeviceTypeOf(GgmlType type, CudaWeights mode) {
  if (mode == CudaWeights::kBf16) return GgmlType::kBF16;
  if (IsQuantized(type) || type == GgmlType::kBF16 || type == GgmlType::kF32) return type;
  return GgmlType::kF32;
}

absl::StatusOr<DeviceWeights> UploadWeights(const model::ModelWeights& weights, CudaWeights mode,
                                            cudaStream_t stream) {
  DeviceWeights d;
  ASSIGN_OR_RETURN(d.token_embd, UploadMatrix(weights.token_embd, mode, "token_embd", stream));
  d.total_bytes += d.token_embd.buffer.bytes();
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    ASSIGN_OR_RETURN(DeviceLayer layer,
                     UploadLayer(weights.layers[l], static_cast<int32_t>(l), mode, stream));
    for (const DeviceMatrix* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate,
                                  &layer.w_up, &layer.w_down}) {
      d.total_bytes += m->buffer.bytes();
      if (IsQuantized(m->view.type)) {
        d.max_quantized_layer_elements =
            std::max(d.max_quantized_layer_elements, m->view.rows * m->view.cols);
      }
    }
    d.total_bytes += layer.attn_norm.bytes() + layer.ffn_norm.bytes();
    d.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(d.output_norm, UploadVector(weights.output_norm, "output_norm", stream));
  d.total_bytes += d.output_norm.bytes();
  if (weights.tied_output) {
    d.output.view = d.token_embd.view;  // the same matrix, converted the same way
  } else {
    ASSIGN_OR_RETURN(d.output, UploadMatrix(weights.output, mode, "output", stream));
    d.total_bytes += d.output.buffer.bytes();
  }
  return d;
}

}  // namespace tandem::device
