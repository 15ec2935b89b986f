// TlsCredentials::FromFiles (--tls-cert / --tls-key): both or neither,
// unreadable and non-PEM files named by path, a key that is not the
// certificate's, an encrypted key refused without prompting; and the HTTPS
// context (MakeServerTlsContext) accepting what FromFiles accepted. The
// certificates are made here with OpenSSL (self-signed P-256).
#include "common/tls/tls_credentials.h"

#include <fstream>
#include <memory>
#include <string>

#include "common/http/http_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Key = std::unique_ptr<EVP_PKEY, PkeyFree>;

Key NewKey() { return Key(EVP_EC_gen("P-256")); }

// A PEM certificate for CN=127.0.0.1, self-signed with `key`, valid a day.
std::string SelfSigned(EVP_PKEY* key) {
  std::unique_ptr<X509, X509Free> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  X509_sign(cert.get(), key, EVP_sha256());
  std::unique_ptr<BIO, BioFree> out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert.get());
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// `key` as PEM; encrypted with `passphrase` when not empty.
std::string KeyPem(EVP_PKEY* key, const std::string& passphrase = "") {
  std::unique_ptr<BIO, BioFree> out(BIO_new(BIO_s_mem()));
  if (passphrase.empty()) {
    PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PrivateKey(out.get(), key, EVP_aes_128_cbc(),
                             reinterpret_cast<const unsigned char*>(passphrase.data()),
                             static_cast<int>(passphrase.size()), nullptr, nullptr);
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string WriteFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/tls_credentials_test_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

class TlsCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = NewKey();
    ASSERT_NE(key_, nullptr);
    cert_pem_ = SelfSigned(key_.get());
    key_pem_ = KeyPem(key_.get());
    cert_ = WriteFile("cert.pem", cert_pem_);
    key_file_ = WriteFile("key.pem", key_pem_);
  }

  Key key_;
  std::string cert_pem_, key_pem_, cert_, key_file_;
};

TEST_F(TlsCredentialsTest, NeitherFlagIsPlaintext) {
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles("", "");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->enabled());
  EXPECT_FALSE(TlsCredentials().enabled());
}

TEST_F(TlsCredentialsTest, ReadsAMatchingPair) {
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles(cert_, key_file_);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->enabled());
  EXPECT_EQ(tls->certificate_chain(), cert_pem_);
  EXPECT_EQ(tls->private_key(), key_pem_);
  EXPECT_EQ(tls->cert_file(), cert_);
  // What FromFiles accepts, the HTTPS listener accepts too.
  EXPECT_TRUE(MakeServerTlsContext(*tls).ok());
}

TEST_F(TlsCredentialsTest, BothFlagsOrNeither) {
  absl::StatusOr<TlsCredentials> only_cert = TlsCredentials::FromFiles(cert_, "");
  EXPECT_EQ(only_cert.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(only_cert.status().message()), HasSubstr("needs --tls-key"));
  absl::StatusOr<TlsCredentials> only_key = TlsCredentials::FromFiles("", key_file_);
  EXPECT_EQ(only_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(only_key.status().message()), HasSubstr("needs --tls-cert"));
}

TEST_F(TlsCredentialsTest, UnreadableFilesAreNamed) {
  const std::string missing = ::testing::TempDir() + "/no/such/cert.pem";
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles(missing, key_file_);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(tls.status().message()), HasSubstr("--tls-cert '" + missing + "'"));
  tls = TlsCredentials::FromFiles(cert_, missing);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(tls.status().message()), HasSubstr("--tls-key '" + missing + "'"));
  tls = TlsCredentials::FromFiles(::testing::TempDir(), key_file_);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()), HasSubstr("is a directory"));
  const std::string empty = WriteFile("empty.pem", "");
  tls = TlsCredentials::FromFiles(cert_, empty);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()), HasSubstr("'" + empty + "' is empty"));
}

TEST_F(TlsCredentialsTest, FilesOfTheWrongKindAreNamed) {
  // The key where the certificate belongs, and the other way round.
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles(key_file_, cert_);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()),
              HasSubstr("--tls-cert '" + key_file_ + "' holds no PEM certificate"));
  tls = TlsCredentials::FromFiles(cert_, cert_);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()),
              HasSubstr("--tls-key '" + cert_ + "' holds no unencrypted PEM private key"));
}

TEST_F(TlsCredentialsTest, AKeyOfAnotherCertificateIsRefused) {
  Key other = NewKey();
  const std::string other_key = WriteFile("other_key.pem", KeyPem(other.get()));
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles(cert_, other_key);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()),
              HasSubstr("--tls-key '" + other_key +
                        "' is not the private key of the certificate in --tls-cert '" + cert_ +
                        "'"));
}

TEST_F(TlsCredentialsTest, AnEncryptedKeyIsRefusedWithoutPrompting) {
  const std::string encrypted = WriteFile("encrypted_key.pem", KeyPem(key_.get(), "passphrase"));
  absl::StatusOr<TlsCredentials> tls = TlsCredentials::FromFiles(cert_, encrypted);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tls.status().message()), HasSubstr("passphrase-protected"));
}

}  // namespace
}  // namespace tandem
