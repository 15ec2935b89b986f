#include "client/sdk/channel_credentials.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace tandem::sdk {
namespace {

// A CA bundle is a few hundred KiB at most; a larger file is a mistake.
constexpr size_t kMaxCaFileBytes = 1 << 20;

absl::StatusOr<std::string> ReadCaFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string pem;
  if (in) {
    pem.resize(kMaxCaFileBytes + 1);
    in.read(pem.data(), static_cast<std::streamsize>(pem.size()));
    pem.resize(static_cast<size_t>(in.gcount()));
  }
  // A short read ends at end of file (eof set): only a failure without it is one.
  if (!in && !in.eof()) {
    return absl::NotFoundError("cannot read the TLS CA file '" + path +
                               "' (ClientOptions::tls_ca_file): " + std::strerror(errno));
  }
  if (pem.size() > kMaxCaFileBytes) {
    return absl::InvalidArgumentError("the TLS CA file '" + path + "' is larger than " +
                                      std::to_string(kMaxCaFileBytes) +
                                      " bytes: not a PEM certificate file");
  }
  if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError("the TLS CA file '" + path +
                                      "' holds no PEM certificate ('-----BEGIN CERTIFICATE-----')");
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientOptions& options) {
  if (!options.tls && options.tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadCaFile(options.tls_ca_file);
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace tandem::sdk
