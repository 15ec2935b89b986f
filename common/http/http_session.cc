#include "common/http/http_session.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>

#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"

namespace tandem {
namespace {

namespace http = boost::beast::http;
namespace net = boost::asio;
using boost::beast::error_code;
using tcp = net::ip::tcp;

// After an error response the client may still be sending its body; reading
// it (up to this long) lets the client see the response instead of a reset.
constexpr absl::Duration kLingerTime = absl::Seconds(1);

// The first byte of a TLS record of type alert (RFC 8446, 5.1).
constexpr char kTlsAlertRecord = 0x15;

std::chrono::nanoseconds ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

}  // namespace

void HttpResponder::Respond(HttpResponse response) const {
  std::shared_ptr<HttpSession> session = session_.lock();
  if (session == nullptr) return;
  net::post(session->stream_.get_executor(),
            [session, exchange = exchange_, response = std::move(response)]() mutable {
              HttpSession::Outgoing out{HttpSession::Outgoing::Kind::kResponse, {}, nullptr, std::nullopt};
              out.response = std::move(response);
              session->Enqueue(exchange, std::move(out));
            });
}

void HttpResponder::Write(std::string data, std::function<void(bool ok)> done) const {
  std::shared_ptr<HttpSession> session = session_.lock();
  if (session == nullptr) return;
  net::post(session->stream_.get_executor(), [session, exchange = exchange_, data = std::move(data),
                                              done = std::move(done)]() mutable {
    session->Enqueue(exchange,
                     {HttpSession::Outgoing::Kind::kChunk, std::move(data), std::move(done), std::nullopt});
  });
}

void HttpResponder::EndStream() const {
  std::shared_ptr<HttpSession> session = session_.lock();
  if (session == nullptr) return;
  net::post(session->stream_.get_executor(), [session, exchange = exchange_] {
    session->Enqueue(exchange, {HttpSession::Outgoing::Kind::kLastChunk, {}, nullptr, std::nullopt});
  });
}

void HttpResponder::OnClientGone(std::function<void()> on_gone) const {
  std::shared_ptr<HttpSession> session = session_.lock();
  if (session == nullptr) return;
  net::post(session->stream_.get_executor(),
            [session, exchange = exchange_, on_gone = std::move(on_gone)]() mutable {
              session->SetOnGone(exchange, std::move(on_gone));
            });
}

namespace {

// A session past the connection limit gets a short time to ask.
HttpLimits OverCapacityLimits(HttpLimits limits, bool over_capacity) {
  if (over_capacity) limits.idle_timeout = std::min(limits.idle_timeout, kOverCapacityTimeout);
  return limits;
}

// Paths answered past the connection limit: the probes.
bool IsProbe(boost::beast::string_view target) {
  const boost::beast::string_view path = target.substr(0, target.find('?'));
  return path == "/health" || path == "/ready";
}

// The stream of a session: TLS when the server has a context.
HttpStream MakeStream(tcp::socket socket, net::ssl::context* tls_context) {
  if (tls_context != nullptr) return HttpStream(std::move(socket), *tls_context);
  return HttpStream(std::move(socket));
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, net::ssl::context* tls_context,
                         HttpHandler* handler, const HttpLimits& limits,
                         std::atomic<int64_t>* open_exchanges,
                         std::atomic<int64_t>* num_connections, bool over_capacity)
    : stream_(MakeStream(std::move(socket), tls_context)),
      handler_(handler),
      limits_(OverCapacityLimits(limits, over_capacity)),
      open_exchanges_(open_exchanges),
      num_connections_(num_connections),
      over_capacity_(over_capacity) {
  num_connections_->fetch_add(1);
}

HttpSession::~HttpSession() {
  // Only when the server stops with an exchange open: its handler must
  // learn that nobody will read the rest.
  for (Outgoing& out : queue_) {
    if (out.done) out.done(false);
  }
  if (on_gone_) on_gone_();
  if (in_exchange_) open_exchanges_->fetch_sub(1);
  num_connections_->fetch_sub(1);
}

void HttpSession::Run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (self->stream_.tls()) {
      self->Handshake();
    } else {
      self->ReadRequest();
    }
  });
}

void HttpSession::Handshake() {
  // The handshake's reads and writes are the TCP layer's: its timeout bounds
  // a client that connects and sends nothing.
  stream_.tcp().expires_after(ToChrono(limits_.idle_timeout));
  stream_.AsyncHandshake([self = shared_from_this()](error_code ec) {
    if (!ec) {
      self->ReadRequest();
    } else if (IsPlainHttpOnTlsPort(ec)) {
      self->RejectPlainHttp();
    } else {
      self->Close(/*graceful=*/false);  // not TLS, a certificate the client refused, a timeout
    }
  });
}

void HttpSession::RejectPlainHttp() {
  const HttpResponse r = handler_->ErrorResponse(
      400, "this port speaks HTTPS (TLS): send the request to https:// instead of http://");
  auto response =
      std::make_shared<http::response<http::string_body>>(http::status::bad_request, 11);
  response->set(http::field::content_type, r.content_type);
  response->keep_alive(false);
  response->body() = r.body;
  response->prepare_payload();
  stream_.tcp().expires_after(ToChrono(limits_.write_timeout));
  // In plaintext, on the TCP layer: the client never spoke TLS.
  http::async_write(stream_.tcp(), *response,
                    [self = shared_from_this(), response](error_code, size_t) {
                      self->Close(/*graceful=*/true);
                    });
}

void HttpSession::ReadRequest() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  stream_.tcp().expires_after(ToChrono(limits_.idle_timeout));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
}

namespace {

// Why a request header that parsed cannot be served (status 0 when it can):
// RFC 9112 requires Host in HTTP/1.1 (section 3.2) and has a server answer
// 501 to a transfer coding it does not implement (section 6.1). Beast would
// wait for the body of such a request until the idle timeout.
std::pair<int, std::string> HeaderError(const http::request<http::string_body>& r) {
  if (r.version() >= 11 && r.find(http::field::host) == r.end()) {
    return {400, "an HTTP/1.1 request needs a Host header"};
  }
  const auto te = r.find(http::field::transfer_encoding);
  if (te == r.end()) return {0, ""};
  // (Beast itself refuses "chunked" beside a Content-Length.)
  if (!boost::beast::iequals(te->value(), "chunked")) {
    return {501, "Transfer-Encoding '" + std::string(te->value()) +
                     "' is not supported: only 'chunked' is"};
  }
  return {0, ""};
}

}  // namespace

void HttpSession::OnHeader(error_code ec) {
  if (ec) {
    OnRead(ec);
    return;
  }
  auto [status, message] = HeaderError(parser_->get());
  if (status == 0 && over_capacity_ && !IsProbe(parser_->get().target())) {
    status = 503;
    message = "the server has " + std::to_string(num_connections_->load() - 1) +
              " connections open, its limit (--http-max-connections " +
              std::to_string(limits_.max_connections) + "): retry later";
  }
  if (status != 0) {
    Reject(status, std::move(message));
    return;
  }
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
}

void HttpSession::OnRead(error_code ec) {
  if (!ec) {
    StartExchange();
    return;
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    RejectUnreadable(ec);
    return;
  }
  Close(/*graceful=*/false);  // the client closed, reset or timed out
}

void HttpSession::RejectUnreadable(error_code ec) {
  int status = 400;
  std::string message = "the request is not valid HTTP/1.1: " + ec.message();
  if (ec == http::error::body_limit) {
    status = 413;
    message = "the request body is larger than the limit of " +
              std::to_string(limits_.max_body_bytes) + " bytes";
  } else if (ec == http::error::header_limit) {
    status = 431;
    message = "the request header is larger than the limit of " +
              std::to_string(limits_.max_header_bytes) + " bytes";
  }
  Reject(status, std::move(message));
}

void HttpSession::Reject(int status, std::string message) {
  ++exchange_;
  in_exchange_ = true;
  open_exchanges_->fetch_add(1);
  keep_alive_ = false;
  Outgoing out{Outgoing::Kind::kResponse, {}, nullptr, std::nullopt};
  out.response = handler_->ErrorResponse(status, message);
  Enqueue(exchange_, std::move(out));
}

void HttpSession::StartExchange() {
  ++exchange_;
  in_exchange_ = true;
  ending_ = false;
  header_sent_ = false;
  open_exchanges_->fetch_add(1);
  keep_alive_ = parser_->get().keep_alive() && !over_capacity_;
  version_ = parser_->get().version();
  HttpRequest request = parser_->release();
  parser_.reset();
  stream_.tcp().expires_never();
  handler_->Handle(request, HttpResponder(weak_from_this(), exchange_));
  WatchForClose();
}

void HttpSession::EndExchange() {
  in_exchange_ = false;
  on_gone_ = nullptr;
  open_exchanges_->fetch_sub(1);
  if (closed_) return;
  error_code ignored;
  stream_.tcp().socket().cancel(ignored);  // the close watch
  if (keep_alive_) {
    ReadRequest();
  } else {
    Close(/*graceful=*/true);
  }
}

void HttpSession::WatchForClose() {
  if (closed_ || !in_exchange_) return;
  stream_.tcp().socket().async_wait(
      tcp::socket::wait_read, [self = shared_from_this(), exchange = exchange_](error_code ec) {
        if (ec == net::error::operation_aborted || self->closed_) return;
        if (!self->in_exchange_ || self->exchange_ != exchange) return;
        if (!ec) {
          // Readable can be stale (an edge-triggered readiness whose bytes
          // the request's read already took): peek without blocking. Bytes
          // are the client's next request, read once this exchange ends
          // (closing is then seen by a failed write or the read); nothing
          // yet means the wake was spurious: watch again.
          // Over TLS a record of type alert (the client's close_notify, or a
          // fatal alert) ends the connection as surely as a close does.
          char byte;
          const ssize_t n = ::recv(self->stream_.tcp().socket().native_handle(), &byte, 1,
                                   MSG_PEEK | MSG_DONTWAIT);
          if (n > 0 && !(self->stream_.tls() && byte == kTlsAlertRecord)) return;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            self->WatchForClose();
            return;
          }
        }
        self->ClientGone();  // end of stream, reset, or an error
      });
}

void HttpSession::ClientGone() {
  std::function<void()> on_gone = std::exchange(on_gone_, nullptr);
  Close(/*graceful=*/false);
  if (on_gone) on_gone();
}

void HttpSession::SetOnGone(uint64_t exchange, std::function<void()> on_gone) {
  if (exchange != exchange_ || !in_exchange_) return;
  if (closed_) {
    on_gone();
    return;
  }
  on_gone_ = std::move(on_gone);
}

void HttpSession::Enqueue(uint64_t exchange, Outgoing out) {
  if (exchange != exchange_ || !in_exchange_ || ending_ || closed_) {
    if (out.done) out.done(false);
    return;
  }
  if (out.kind != Outgoing::Kind::kChunk) ending_ = true;
  queue_.push_back(std::move(out));
  WriteNext();
}

void HttpSession::WriteNext() {
  if (writing_ || queue_.empty() || closed_) return;
  writing_ = true;
  stream_.tcp().expires_after(ToChrono(limits_.write_timeout));
  auto on_written = [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(!ec); };
  Outgoing& out = queue_.front();
  if (out.kind == Outgoing::Kind::kResponse) {
    const HttpResponse& r = *out.response;
    response_.emplace(static_cast<http::status>(r.status), 11);
    response_->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) response_->set(name, value);
    response_->keep_alive(keep_alive_);
    response_->body() = r.body;
    response_->prepare_payload();
    http::async_write(stream_, *response_, std::move(on_written));
    return;
  }
  if (!header_sent_) {
    header_sent_ = true;
    // HTTP/1.0 has no chunked encoding: the body ends with the connection.
    const bool chunked = version_ >= 11;
    if (!chunked) keep_alive_ = false;
    stream_header_.emplace(http::status::ok, chunked ? 11 : 10);
    stream_header_->set(http::field::content_type, "text/event-stream");
    stream_header_->set(http::field::cache_control, "no-cache");
    stream_header_->keep_alive(keep_alive_);
    stream_header_->chunked(chunked);
    header_serializer_.emplace(*stream_header_);
    http::async_write_header(stream_, *header_serializer_,
                             [self = shared_from_this()](error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) {
                                 self->OnWritten(false);
                               } else {
                                 self->WriteNext();
                               }
                             });
    return;
  }
  if (version_ < 11) {
    // Raw bytes; the last "chunk" is empty and the close ends the body.
    net::async_write(stream_, net::buffer(out.data), std::move(on_written));
  } else if (out.kind == Outgoing::Kind::kChunk) {
    net::async_write(stream_, http::make_chunk(net::buffer(out.data)), std::move(on_written));
  } else {
    net::async_write(stream_, http::make_chunk_last(), std::move(on_written));
  }
}

void HttpSession::OnWritten(bool ok) {
  writing_ = false;
  if (!closed_) stream_.tcp().expires_never();
  if (!ok) {
    std::deque<Outgoing> failed = std::exchange(queue_, {});
    ClientGone();
    for (Outgoing& out : failed) {
      if (out.done) out.done(false);
    }
    return;
  }
  Outgoing out = std::move(queue_.front());
  queue_.pop_front();
  if (out.done) out.done(true);
  if (out.kind == Outgoing::Kind::kChunk) {
    WriteNext();
  } else {
    EndExchange();
  }
}

void HttpSession::Close(bool graceful) {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  if (!graceful) {
    stream_.tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.tcp().close();
    return;
  }
  // Half-close, then read what the client still sends until it closes too
  // (or kLingerTime passes), so it reads our response rather than a reset.
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.tcp().expires_after(ToChrono(kLingerTime));
  Drain();
}

void HttpSession::Drain() {
  auto scratch = std::make_shared<std::array<char, 4096>>();
  // Raw bytes, over TLS too: they are discarded, not decrypted.
  stream_.tcp().async_read_some(net::buffer(*scratch),
                                [self = shared_from_this(), scratch](error_code ec, size_t) {
                                  if (ec) {
                                    self->stream_.tcp().close();
                                  } else {
                                    self->Drain();
                                  }
                                });
}

}  // namespace tandem
