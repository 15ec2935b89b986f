// Builds GGUF v3 files: metadata in insertion order, then tensor infos, then
// the tensor data, each tensor padded to the alignment (32, or the value of
// general.alignment). Used by tests to build fixtures and by `tandem
// make-model`.
//
// Thread-safety: not thread-safe; one thread builds a file.
#ifndef TANDEM_ENGINE_GGUF_GGUF_WRITER_H_
#define TANDEM_ENGINE_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/gguf/ggml_type.h"
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

  // The alignment Serialize pads to: general.alignment when it is set to an
  // integer power of two, else 32. (A key set to another value is still
  // written as given, so tests can build files a reader must reject.)
  uint64_t alignment() const;

  // The whole file. The last tensor is padded too, as ggml does.
  std::string Serialize() const;
  // Serialize() written to `path` (replaced if present). Unavailable naming
  // the path when it cannot be written.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::string bytes;
  };

  std::vector<std::pair<std::string, MetadataValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_GGUF_WRITER_H_
