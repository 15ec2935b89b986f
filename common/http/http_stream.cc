#include "common/http/http_stream.h"

#include "absl/strings/str_format.h"
#include "boost/asio/ssl/error.hpp"
#include "openssl/err.h"
#include "openssl/ssl.h"

namespace tandem {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

}  // namespace

absl::StatusOr<std::unique_ptr<ssl::context>> MakeServerTlsContext(const TlsCredentials& tls) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  // TLS 1.2 and 1.3 only (what gRPC accepts too); no compression (CRIME).
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1 | ssl::context::no_compression |
                       ssl::context::single_dh_use);
  boost::beast::error_code ec;
  context->use_certificate_chain(net::buffer(tls.certificate_chain()), ec);
  if (!ec) context->use_private_key(net::buffer(tls.private_key()), ssl::context::pem, ec);
  if (ec) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrFormat("HTTPS cannot use --tls-cert '%s' with --tls-key '%s': %s",
                        tls.cert_file(), tls.key_file(), ec.message()));
  }
  return context;
}

bool IsPlainHttpOnTlsPort(const boost::beast::error_code& ec) {
  return ec.category() == net::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST;
}

HttpStream::HttpStream(net::ip::tcp::socket socket) { tcp_.emplace(std::move(socket)); }

HttpStream::HttpStream(net::ip::tcp::socket socket, ssl::context& context) {
  tls_.emplace(std::move(socket), context);
}

}  // namespace tandem
