// TlsCredentials: a server's TLS identity (tandem-coordinator --tls-cert /
// --tls-key): a PEM certificate chain and the PEM private key of its first
// certificate, read and checked once at start-up so that a bad file is an
// error naming its path before anything listens, never a crash or a
// listener that fails every handshake later. Both public ports (gRPC and
// HTTP) serve this identity. A default TlsCredentials is plaintext.
//
// Thread-safety: immutable after construction; read from any thread.
#ifndef TANDEM_COMMON_TLS_TLS_CREDENTIALS_H_
#define TANDEM_COMMON_TLS_TLS_CREDENTIALS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

// The largest certificate or key file read: a chain is a few KiB; a larger
// file (or /dev/zero) is a mistake, refused rather than read for ever.
inline constexpr size_t kMaxTlsFileBytes = 1 << 20;

// The PEM certificates of `path` (the CAs a client trusts, e.g. the
// coordinator's --internal-tls-ca), read and checked at start-up like the
// server's files: NOT_FOUND naming `flag` and the path when it cannot be
// read, INVALID_ARGUMENT when it holds no PEM certificate.
absl::StatusOr<std::string> ReadTlsCaFile(const std::string& path, const std::string& flag);

class TlsCredentials {
 public:
  TlsCredentials() = default;  // plaintext

  // From --tls-cert (`cert_file`) and --tls-key (`key_file`): both empty →
  // plaintext; both given → TLS with that identity. INVALID_ARGUMENT naming
  // the missing flag when only one is given, naming the path when a file is
  // not PEM of the right kind (an encrypted key counts: nothing may prompt
  // for a passphrase) or the key is not the first certificate's;
  // NOT_FOUND naming the path (and the system's reason) when a file cannot
  // be read.
  static absl::StatusOr<TlsCredentials> FromFiles(const std::string& cert_file,
                                                  const std::string& key_file);

  bool enabled() const { return !certificate_chain_.empty(); }
  // PEM: the server's certificate first, then any intermediates.
  const std::string& certificate_chain() const { return certificate_chain_; }
  // PEM, unencrypted.
  const std::string& private_key() const { return private_key_; }
  // The paths read, for messages.
  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  std::string certificate_chain_;
  std::string private_key_;
  std::string cert_file_;
  std::string key_file_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TLS_TLS_CREDENTIALS_H_
