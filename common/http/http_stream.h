// HttpStream: the byte stream of one HTTP connection as Boost.Beast reads and
// writes it: plain TCP, or TLS over TCP (HTTPS, HttpServer started with
// TlsCredentials). Beast's algorithms (http::async_read, async_write, ...)
// take it as they take a tcp_stream; the TCP layer underneath (tcp()) keeps
// the timeouts (expires_after applies to the TLS records' reads and writes
// too) and the socket. One type for both, so that HttpSession is written
// once.
//
// Thread-safety: as the streams it wraps: one strand uses it.
#ifndef TANDEM_COMMON_HTTP_HTTP_STREAM_H_
#define TANDEM_COMMON_HTTP_HTTP_STREAM_H_

#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/ssl/ssl_stream.hpp"
#include "common/tls/tls_credentials.h"

namespace tandem {

// A server-side TLS context serving `tls`'s identity, TLS 1.2 and later
// only. INVALID_ARGUMENT naming the files when OpenSSL refuses them (they
// were checked by TlsCredentials::FromFiles, so this is unexpected).
absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const TlsCredentials& tls);

// True when `ec` is a TLS handshake that failed because the client spoke
// plain HTTP (OpenSSL recognizes "GET ", "POST ", "HEAD ", "PUT ").
bool IsPlainHttpOnTlsPort(const boost::beast::error_code& ec);

class HttpStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  // Plain TCP over `socket`.
  explicit HttpStream(boost::asio::ip::tcp::socket socket);
  // TLS over `socket` with `context`'s identity (the context must outlive
  // the stream); AsyncHandshake before anything is read.
  HttpStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& context);

  bool tls() const { return tls_.has_value(); }
  executor_type get_executor() { return tcp().get_executor(); }
  // The TCP layer: its timeouts and socket, and raw bytes (a plain-HTTP
  // error on a TLS port, draining before a close).
  boost::beast::tcp_stream& tcp() { return tls_.has_value() ? tls_->next_layer() : *tcp_; }

  // The server side of the TLS handshake; `handler(error_code)`. TLS only.
  template <class Handler>
  void AsyncHandshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(handler));
  }

  // Beast's AsyncReadStream / AsyncWriteStream: bytes through TLS when on.
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_.has_value()) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_.has_value()) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  std::optional<boost::beast::tcp_stream> tcp_;  // plain
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_HTTP_HTTP_STREAM_H_
