#include "client/cluster_key_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace tandem::client {
namespace {

constexpr size_t kKeyBytes = 32;

absl::Status SystemError(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrFormat("cluster key: %s %s: %s", what, path, std::strerror(errno)));
}

// The key's bytes from the kernel's random source (blocks only before the
// pool is initialized, at boot).
absl::StatusOr<std::string> RandomKey() {
  std::string bytes(kKeyBytes, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SystemError("getrandom for", "the key");
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(bytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterKeyFile>> ClusterKeyFile::Create() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string base = runtime != nullptr && runtime[0] != '\0' ? runtime : "/tmp";
  std::vector<char> dir(base.begin(), base.end());
  const std::string suffix = "/tandem-up-XXXXXX";
  dir.insert(dir.end(), suffix.begin(), suffix.end());
  dir.push_back('\0');
  if (mkdtemp(dir.data()) == nullptr) return SystemError("mkdtemp", base + suffix);
  auto file = std::unique_ptr<ClusterKeyFile>(
      new ClusterKeyFile(dir.data(), std::string(dir.data()) + "/cluster.key"));
  absl::StatusOr<std::string> key = RandomKey();
  if (!key.ok()) return key.status();
  const int fd = open(file->path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError("open", file->path_);
  const std::string text = *key + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) return SystemError("write", file->path_);
  return file;
}

ClusterKeyFile::~ClusterKeyFile() {
  unlink(path_.c_str());
  rmdir(dir_.c_str());
}

}  // namespace tandem::client
