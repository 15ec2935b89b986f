// HttpServer: an HTTP/1.1 server on Boost.Beast / Boost.Asio, serving one
// HttpHandler (the coordinator's OpenAI-compatible API, a worker's
// /metrics), over plain TCP or, given TlsCredentials, HTTPS only (every
// path of the handler on the one TLS listener). A fixed pool of I/O threads
// runs every connection (an HttpSession on its own strand): no thread per
// connection or per stream.
//
// Thread-safety: Start, WaitForExchanges and Stop are called by the owning
// thread; the handler's Handle runs on the I/O threads.
#ifndef TANDEM_COMMON_HTTP_HTTP_SERVER_H_
#define TANDEM_COMMON_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "common/http/http_session.h"
#include "common/tls/tls_credentials.h"

namespace tandem {

class HttpServer {
 public:
  // Listens on `host`:`port` (0: the OS picks one) and serves `handler`
  // (which must outlive the server) on `num_threads` I/O threads, over TLS
  // when `tls` is enabled. INVALID_ARGUMENT for a host that is not an IP
  // address, a thread count outside [1, 64] or credentials OpenSSL refuses;
  // UNAVAILABLE naming the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& host, int32_t port, HttpHandler* handler, const HttpLimits& limits,
      int32_t num_threads, const TlsCredentials& tls = TlsCredentials());
  // Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "HOST:PORT" as bound (the port the OS picked for 0).
  const std::string& address() const { return address_; }
  // Requests being answered right now (a stream counts until its end).
  int64_t num_open_exchanges() const { return open_exchanges_.load(); }
  // Returns once no exchange is open or at `deadline`; true when none is.
  bool WaitForExchanges(absl::Time deadline) const;
  // Stops accepting, closes every connection (an open exchange's client-gone
  // callback runs) and joins the I/O threads. Idempotent.
  void Stop();

 private:
  HttpServer(HttpHandler* handler, const HttpLimits& limits);
  void Accept();

  HttpHandler* const handler_;
  const HttpLimits limits_;
  // Null: plain HTTP. Declared before the I/O context so that it outlives
  // every session (the context's handlers hold the last references to them).
  std::unique_ptr<boost::asio::ssl::context> tls_context_;
  std::unique_ptr<boost::asio::io_context> io_context_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::string address_;
  std::atomic<int64_t> open_exchanges_{0};
  std::atomic<int64_t> num_connections_{0};  // sessions alive (HttpSession)
  std::vector<std::thread> threads_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_HTTP_HTTP_SERVER_H_
