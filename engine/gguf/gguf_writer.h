// Builds GGUF v3 files: metadata in insertion order, then tensor infos, then
// the tensor data, each tensor padded to the alignment (32, or the value of
// general.alignment). Used by tests to build fixtures and by `tandem
// make-model`.
//
// Two ways to supply tensor bytes: AddTensor keeps them in memory (for
// Serialize / WriteFile); AddTensorInfo declares only the layout and
// WriteStreaming asks for each tensor's bytes when it reaches it, so a file
// far larger than memory (a 16 GB model) holds one tensor at a time.
//
// Thread-safety: not thread-safe; one thread builds a file.
#ifndef TANDEM_ENGINE_GGUF_GGUF_WRITER_H_
#define TANDEM_ENGINE_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/ggml_type.h"
#include "engine/gguf/metadata_value.h"

namespace tandem::gguf {

class GgufWriter {
 public:
  // Sets `key` to `value`. Setting a key again replaces the value in place
  // (keys stay unique, first-insertion order is kept).
  void Add(std::string key, MetadataValue value);
  void AddString(std::string key, std::string value);
  void AddUint32(std::string key, uint32_t value);
  void AddInt32(std::string key, int32_t value);
  void AddUint64(std::string key, uint64_t value);
  void AddFloat32(std::string key, float value);
  void AddBool(std::string key, bool value);
  void AddStringArray(std::string key, const std::vector<std::string>& values);
  void AddInt32Array(std::string key, const std::vector<int32_t>& values);
  void AddFloat32Array(std::string key, const std::vector<float>& values);

  // Adds a tensor whose encoded bytes are `bytes`. InvalidArgument, naming
  // the tensor and the offending value, for an unknown type, 0 or more than 4
  // dims, a dim < 1, dims[0] not a multiple of the block size, a byte size
  // other than elements / block_size * type_size, or a duplicate name.
  absl::Status AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                         std::string bytes);

  // Declares a tensor whose bytes WriteStreaming will request later. The same
  // InvalidArgument checks as AddTensor, less the byte count.
  absl::Status AddTensorInfo(std::string name, GgmlType type, std::vector<int64_t> dims);

  // Encoded byte size of tensor `index` (in insertion order), without padding.
  // CHECKs index < num_tensors().
  uint64_t TensorByteSize(size_t index) const;
  size_t num_tensors() const { return tensors_.size(); }

  // The alignment Serialize pads to: general.alignment when it is set to an
  // integer power of two, else 32. (A key set to another value is still
  // written as given, so tests can build files a reader must reject.)
  uint64_t alignment() const;

  // Exact size in bytes of the file Serialize / WriteStreaming produce.
  uint64_t FileSize() const;

  // The whole file. The last tensor is padded too, as ggml does. CHECKs that
  // every tensor was added with AddTensor (a tensor declared by AddTensorInfo
  // has no bytes to serialize: a programmer bug).
  std::string Serialize() const;
  // Serialize() written to `path` (replaced if present). Unavailable naming
  // the path when it cannot be written.
  absl::Status WriteFile(const std::string& path) const;

  // Produces the bytes of the tensor at `index` (insertion order). Called once
  // per tensor declared with AddTensorInfo, in increasing index order.
  using TensorProducer = std::function<absl::StatusOr<std::string>(size_t index)>;

  // Writes the same bytes Serialize() would, holding at most one tensor in
  // memory: header and tensor infos first, then each tensor in order — the
  // stored bytes of AddTensor tensors, produce(index) for AddTensorInfo ones.
  // Writes to `path`.partial and renames it to `path` only on success (the
  // partial file is removed on failure), so `path` is never left truncated.
  // Fails with Unavailable naming the path on an I/O error, InvalidArgument
  // naming the tensor when produce returns the wrong number of bytes, or the
  // status produce returned.
  absl::Status WriteStreaming(const std::string& path, const TensorProducer& produce) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    uint64_t num_bytes = 0;  // encoded size, without padding
    bool has_bytes = false;  // AddTensor (bytes below) or AddTensorInfo (streamed)
    std::string bytes;
  };

  // Validates a new tensor's name, type and dims; its encoded size on success.
  absl::StatusOr<uint64_t> CheckTensor(const std::string& name, GgmlType type,
                                       const std::vector<int64_t>& dims) const;
  // Magic, version, counts, metadata and tensor infos, padded to alignment():
  // everything before the first tensor's bytes.
  std::string SerializeHeader() const;

  std::vector<std::pair<std::string, MetadataValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_GGUF_WRITER_H_
