#include "common/tls/tls_credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "openssl/bio.h"
#include "openssl/err.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"

namespace tandem {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, PkeyFree>;

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// Refuses every passphrase request: OpenSSL's default would prompt on the
// terminal, which a server must never do. An encrypted key then fails to
// parse like any unreadable one.
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return -1; }

// The content of `path` (at most kMaxTlsFileBytes), read for `flag`.
absl::StatusOr<std::string> ReadTlsFile(const std::string& path, const std::string& flag) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read %s '%s': %s", flag, path, std::strerror(errno)));
  }
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s' is a directory, not a PEM file", flag, path));
  }
  std::string content;
  char chunk[8192];
  while (content.size() <= kMaxTlsFileBytes) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::NotFoundError(
          absl::StrFormat("cannot read %s '%s': %s", flag, path, std::strerror(errno)));
    }
    if (n == 0) break;
    content.append(chunk, static_cast<size_t>(n));
  }
  if (content.size() > kMaxTlsFileBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' is larger than %d bytes: not a PEM file", flag, path, kMaxTlsFileBytes));
  }
  if (content.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s '%s' is empty", flag, path));
  }
  return content;
}

// OpenSSL's reason for the last failure ("" when it left none), and the
// thread's error queue emptied so that no stale error confuses a later call.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  std::string reason;
  if (code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    reason = absl::StrFormat(" (%s)", text);
  }
  ERR_clear_error();
  return reason;
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

absl::StatusOr<std::string> ReadTlsCaFile(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> pem = ReadTlsFile(path, flag);
  if (!pem.ok()) return pem.status();
  Bio bio = MemoryBio(*pem);
  Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' holds no PEM certificate ('-----BEGIN CERTIFICATE-----')%s", flag, path,
        TakeOpenSslError()));
  }
  return pem;
}

absl::StatusOr<TlsCredentials> TlsCredentials::FromFiles(const std::string& cert_file,
                                                        const std::string& key_file) {
  if (cert_file.empty() && key_file.empty()) return TlsCredentials();
  if (key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tls-cert '%s' needs --tls-key FILE (its private key): give both or neither",
        cert_file));
  }
  if (cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tls-key '%s' needs --tls-cert FILE (its certificate): give both or neither",
        key_file));
  }
  TlsCredentials tls;
  tls.cert_file_ = cert_file;
  tls.key_file_ = key_file;
  absl::StatusOr<std::string> chain = ReadTlsFile(cert_file, "--tls-cert");
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> key_pem = ReadTlsFile(key_file, "--tls-key");
  if (!key_pem.ok()) return key_pem.status();

  Bio cert_bio = MemoryBio(*chain);
  Certificate cert(PEM_read_bio_X509(cert_bio.get(), nullptr, NoPassphrase, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tls-cert '%s' holds no PEM certificate ('-----BEGIN CERTIFICATE-----')%s", cert_file,
        TakeOpenSslError()));
  }
  Bio key_bio = MemoryBio(*key_pem);
  PrivateKey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tls-key '%s' holds no unencrypted PEM private key ('-----BEGIN PRIVATE KEY-----'; "
        "a passphrase-protected key must be decrypted first)%s",
        key_file, TakeOpenSslError()));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tls-key '%s' is not the private key of the certificate in --tls-cert '%s'%s",
        key_file, cert_file, TakeOpenSslError()));
  }
  tls.certificate_chain_ = *std::move(chain);
  tls.private_key_ = *std::move(key_pem);
  return tls;
}

}  // namespace tandem
