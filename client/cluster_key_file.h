// ClusterKeyFile: the internal key `tandem up` makes for the cluster it
// starts — 32 random bytes (getrandom), hex-encoded — written to a file only
// its owner can read (mode 0600, in a fresh 0700 directory under
// $XDG_RUNTIME_DIR, else /tmp). Workers and the draft worker get it as
// --api-key-file and require it on every call; the coordinator presents it
// (--cluster-key-file). So the internal ports are closed to other local
// users and to any local process that was not handed the file
// (docs/reliability.md, "Trust model").
//
// The file and its directory are removed when the object is destroyed.
// Thread-safety: immutable after Create.
#ifndef TANDEM_CLIENT_CLUSTER_KEY_FILE_H_
#define TANDEM_CLIENT_CLUSTER_KEY_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::client {

class ClusterKeyFile {
 public:
  // A new key in a new file. INTERNAL naming the path and the system's
  // reason when the directory or file cannot be made or written.
  static absl::StatusOr<std::unique_ptr<ClusterKeyFile>> Create();
  ~ClusterKeyFile();
  ClusterKeyFile(const ClusterKeyFile&) = delete;
  ClusterKeyFile& operator=(const ClusterKeyFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  ClusterKeyFile(std::string dir, std::string path)
      : dir_(std::move(dir)), path_(std::move(path)) {}

  std::string dir_;
  std::string path_;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_CLUSTER_KEY_FILE_H_
