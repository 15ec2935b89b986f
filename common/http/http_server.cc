#include "common/http/http_server.h"

#include "absl/strings/str_format.h"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "common/http/http_stream.h"
#include "common/logging.h"

namespace tandem {
namespace {

namespace net = boost::asio;
using boost::beast::error_code;
using tcp = net::ip::tcp;

constexpr int32_t kMaxThreads = 64;

}  // namespace

HttpServer::HttpServer(HttpHandler* handler, const HttpLimits& limits)
    : handler_(handler), limits_(limits), io_context_(std::make_unique<net::io_context>()) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& host, int32_t port, HttpHandler* handler, const HttpLimits& limits,
    int32_t num_threads, const TlsCredentials& tls) {
  if (num_threads < 1 || num_threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "HTTP threads %d is out of range: must be in [1, %d]", num_threads, kMaxThreads));
  }
  error_code ec;
  const net::ip::address ip = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrFormat("HTTP host '%s' is not an IP address: %s", host, ec.message()));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(handler, limits));
  if (tls.enabled()) {
    absl::StatusOr<std::unique_ptr<net::ssl::context>> context = MakeServerTlsContext(tls);
    if (!context.ok()) return context.status();
    server->tls_context_ = *std::move(context);
  }
  auto acceptor = std::make_unique<tcp::acceptor>(*server->io_context_);
  const tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrFormat("cannot listen for HTTP on %s:%d: %s", host, port, ec.message()));
  }
  const tcp::endpoint bound = acceptor->local_endpoint();
  server->address_ = absl::StrFormat("%s:%d", bound.address().to_string(), bound.port());
  server->acceptor_ = std::move(acceptor);
  server->Accept();
  for (int32_t i = 0; i < num_threads; ++i) {
    server->threads_.emplace_back([io = server->io_context_.get()] { io->run(); });
  }
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Accept() {
  acceptor_->async_accept(net::make_strand(*io_context_), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      const bool over_capacity = num_connections_.load() >= limits_.max_connections;
      std::make_shared<HttpSession>(std::move(socket), tls_context_.get(), handler_, limits_,
                                    &open_exchanges_, &num_connections_, over_capacity)
          ->Run();
      Accept();
      return;
    }
    // Out of file descriptors and the like: retry shortly instead of
    // spinning on the same error.
    TANDEM_LOG(kWarning, "HTTP accept on %s failed: %s", address_, ec.message());
    auto timer = std::make_shared<net::steady_timer>(*io_context_, std::chrono::milliseconds(50));
    timer->async_wait([this, timer](error_code wait_ec) {
      if (!wait_ec) Accept();
    });
  });
}

bool HttpServer::WaitForExchanges(absl::Time deadline) const {
  // Polled: the drain happens once per process life and lasts seconds.
  while (open_exchanges_.load() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

void HttpServer::Stop() {
  if (io_context_ == nullptr) return;
  io_context_->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  acceptor_.reset();
  // Destroying the context destroys the handlers still queued, and with
  // them the last references to every session.
  io_context_.reset();
}

}  // namespace tandem
