// HttpSession: one HTTP/1.1 connection of an HttpServer, on Boost.Beast. It
// reads one request at a time (keep-alive, within HttpLimits), hands it to
// the server's HttpHandler together with an HttpResponder for its answer, and
// writes that answer: a complete response, or a server-sent-event stream
// (`Transfer-Encoding: chunked`, one chunk per Write) ended by EndStream.
// While an answer is pending the session watches the socket: a client that
// closes or resets the connection triggers the exchange's client-gone
// callback once (a generation request cancels itself from it).
//
// Over TLS (an HttpServer with TlsCredentials) the session first completes
// the handshake within idle_timeout; a client that speaks plain HTTP to the
// TLS port is answered a plaintext 400 saying to use https:// and closed (a
// plaintext client sees why instead of a reset), any other failed handshake
// is closed at once.
//
// Limits: a header over max_header_bytes is answered 431, a body over
// max_body_bytes 413, an unparsable request 400, each followed by a close; a
// connection with no complete request within idle_timeout is closed (idle
// keep-alive and slowloris alike); a write that does not finish within
// write_timeout (a client that stopped reading) closes the connection, which
// counts as the client going away.
//
// Thread-safety: the session's state lives on its strand (every handler
// of its socket runs there). HttpResponder's methods may be called from any
// thread: they post to the strand and are ignored once their exchange is over
// or the session is gone.
#ifndef TANDEM_COMMON_HTTP_HTTP_SESSION_H_
#define TANDEM_COMMON_HTTP_HTTP_SESSION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/http/http_stream.h"

namespace tandem {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
  // A connection must deliver a complete request within this, whether it
  // just opened, idles between keep-alive requests, or trickles bytes.
  absl::Duration idle_timeout = absl::Seconds(60);
  // One write to the client must complete within this.
  absl::Duration write_timeout = absl::Seconds(30);
  // Connections served at once. One past it is still accepted, but only
  // for /health and /ready (a liveness probe must not fail because
  // clients hold every slot): it has kOverCapacityTimeout to send its
  // request, anything else gets 503 naming the limit, and it is closed.
  int64_t max_connections = 4096;
};

inline constexpr absl::Duration kOverCapacityTimeout = absl::Seconds(2);

// A complete response.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields, e.g. Allow
};

class HttpSession;

// How a handler answers one request (an "exchange"): exactly one Respond, or
// any number of Write (each with its completion) and one EndStream. A
// copyable handle; every method may be called from any thread and does
// nothing once the exchange ended or the connection is gone (a Write's
// `done` is then called with false, on the session's strand).
class HttpResponder {
 public:
  HttpResponder() = default;

  void Respond(HttpResponse response) const;
  // Writes `data` as one chunk of the `text/event-stream` response (its
  // header goes out before the first chunk); `done(ok)` runs on the strand
  // once written (ok false: the client is gone or too slow).
  void Write(std::string data, std::function<void(bool ok)> done) const;
  // Ends the stream (the last chunk); the connection then serves the next
  // request if the client keeps it alive.
  void EndStream() const;
  // `on_gone` runs once, on the strand, if the client disconnects before the
  // exchange ends. Replaces an earlier callback.
  void OnClientGone(std::function<void()> on_gone) const;

 private:
  friend class HttpSession;
  HttpResponder(std::weak_ptr<HttpSession> session, uint64_t exchange)
      : session_(std::move(session)), exchange_(exchange) {}

  std::weak_ptr<HttpSession> session_;
  uint64_t exchange_ = 0;
};

// Answers requests; Handle runs on a session's strand and must not block.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(const HttpRequest& request, HttpResponder responder) = 0;
  // The answer to a request that could not be read (`status` 400, 413,
  // 431 or 501; `message` says why, naming the limit).
  virtual HttpResponse ErrorResponse(int status, const std::string& message) = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // `handler` and the counter must outlive the session; `open_exchanges`
  // counts the exchanges being answered (HttpServer drains on it). With
  // `tls_context` (which must outlive the session too) the connection speaks
  // TLS; null: plain HTTP.
  // `num_connections` (which must outlive the session too) counts the
  // server's sessions: this one from construction to destruction.
  // `over_capacity`: the session was accepted past limits.max_connections.
  HttpSession(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls_context,
              HttpHandler* handler, const HttpLimits& limits,
              std::atomic<int64_t>* open_exchanges, std::atomic<int64_t>* num_connections,
              bool over_capacity);
  ~HttpSession();

  // Starts the TLS handshake, or reading the first request.
  void Run();

 private:
  friend class HttpResponder;
  struct Outgoing {
    enum class Kind { kResponse, kChunk, kLastChunk } kind;
    std::string data;                      // kChunk
    std::function<void(bool)> done;        // may be empty
    std::optional<HttpResponse> response;  // kResponse
  };

  void Handshake();
  // Answers a plain-HTTP request on the TLS port in plaintext (400) and closes.
  void RejectPlainHttp();
  // Reads the header, checks it (HeaderError), then reads the body.
  void ReadRequest();
  void OnHeader(boost::beast::error_code ec);
  void OnRead(boost::beast::error_code ec);
  // Answers a request that could not be read (400/413/431) and closes.
  void RejectUnreadable(boost::beast::error_code ec);
  // Answers the request with `status` and `message` and closes.
  void Reject(int status, std::string message);
  void StartExchange();
  void EndExchange();
  void WatchForClose();
  void ClientGone();

  // Strand-side bodies of HttpResponder's methods.
  void Enqueue(uint64_t exchange, Outgoing out);
  void SetOnGone(uint64_t exchange, std::function<void()> on_gone);
  void WriteNext();
  void OnWritten(bool ok);
  // Closes the connection: at once, or (`graceful`) after a half-close and
  // reading what the client still sends, for at most a second.
  void Close(bool graceful);
  void Drain();

  HttpStream stream_;
  boost::beast::flat_buffer buffer_;
  HttpHandler* const handler_;
  const HttpLimits limits_;
  std::atomic<int64_t>* const open_exchanges_;
  std::atomic<int64_t>* const num_connections_;
  const bool over_capacity_;

  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  uint64_t exchange_ = 0;   // the current exchange's number; 0 before the first
  bool in_exchange_ = false;
  bool ending_ = false;  // the exchange's last write is queued
  bool keep_alive_ = false;
  // The request's HTTP version (10 or 11): an HTTP/1.0 client gets a stream
  // as raw bytes up to the close, since it cannot read chunked encoding.
  unsigned version_ = 11;
  bool header_sent_ = false;  // stream: the response header is out
  bool closed_ = false;
  bool watching_ = false;
  std::function<void()> on_gone_;
  std::deque<Outgoing> queue_;
  bool writing_ = false;
  // What the write in flight reads.
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> stream_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      header_serializer_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_HTTP_HTTP_SESSION_H_
