#include "client/openai_bench_client.h"

#include <chrono>
#include <exception>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "nlohmann/json.hpp"

namespace tandem::client {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::chrono::seconds TimeoutOf(int32_t timeout_s) {
  return std::chrono::seconds(timeout_s > 0 ? timeout_s : 24 * 3600);
}

// A connected stream to the target, with the timeout on every operation.
beast::tcp_stream Connect(net::io_context& io, const OpenAiTarget& t, int32_t timeout_s) {
  net::ip::tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  stream.expires_after(TimeoutOf(timeout_s));
  stream.connect(resolver.resolve(t.host, t.port));
  return stream;
}

json Payload(const OpenAiTarget& t, const JsonRequest& r) {
  const sampling::SamplingParams& p = r.params;
  json body = {{"model", t.model},
               {"max_tokens", p.max_tokens},
               {"temperature", p.temperature},
               {"top_p", p.top_p},
               {"ignore_eos", p.ignore_eos},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (r.prompt_token_ids) {
    body["prompt"] = *r.prompt_token_ids;
  } else {
    body["prompt"] = r.prompt.value_or("");
  }
  if (p.top_k > 0) body["top_k"] = p.top_k;
  if (p.seed) body["seed"] = *p.seed;
  return body;
}

// Folds one server-sent event's data into the record; true at [DONE].
bool OnEvent(std::string_view data, Clock::time_point start, Clock::time_point& last,
             int64_t& text_events, RequestRecord& rec) {
  if (data == "[DONE]") return true;
  const json event = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) {
    rec.error = "the server sent an event that is not JSON";
    return true;
  }
  if (event.contains("error")) {
    rec.error = event["error"].dump();
    return true;
  }
  const Clock::time_point now = Clock::now();
  bool text = false;
  if (event.contains("choices")) {
    for (const json& c : event["choices"]) {
      text |= c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty();
    }
  }
  if (text) {
    if (text_events == 0) {
      rec.ttft_s = Seconds(now - start);
    } else {
      rec.itl_s.push_back(Seconds(now - last));
    }
    last = now;
    ++text_events;
  }
  if (event.contains("usage") && event["usage"].is_object()) {
    rec.input_tokens = event["usage"].value("prompt_tokens", int64_t{0});
    rec.output_tokens = event["usage"].value("completion_tokens", int64_t{0});
  }
  return false;
}

// Reads the SSE body of `parser`'s response, event by event.
void ReadEvents(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                http::response_parser<http::buffer_body>& parser, Clock::time_point start,
                RequestRecord& rec) {
  char chunk[8192];
  std::string pending;
  Clock::time_point last = start;
  int64_t text_events = 0;
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    beast::error_code ec;
    // read_some: return with whatever arrived (read would wait for a full
    // buffer, bunching the events up).
    http::read_some(stream, buffer, parser, ec);
    if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
    pending.append(chunk, sizeof(chunk) - parser.get().body().size);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      std::string_view event(pending.data(), end);
      if (event.substr(0, 6) == "data: " &&
          OnEvent(event.substr(6), start, last, text_events, rec)) {
        if (rec.output_tokens == 0) rec.output_tokens = text_events;
        return;
      }
      pending.erase(0, end + 2);
    }
  }
  rec.error = "the stream ended before data: [DONE]";
}

}  // namespace

absl::StatusOr<OpenAiTarget> ParseOpenAiUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--url '%s' %s: give http://HOST:PORT[/PATH], e.g. http://127.0.0.1:8000/v1", url, why));
  };
  if (url.rfind(kScheme, 0) != 0) return bad("is not an http:// URL");
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == authority.size()) return bad("has no port");
  if (colon == 0) return bad("has no host");
  OpenAiTarget t;
  t.host = std::string(authority.substr(0, colon));
  t.port = std::string(authority.substr(colon + 1));
  t.base_path = slash == std::string_view::npos ? "/v1" : std::string(rest.substr(slash));
  while (t.base_path.size() > 1 && t.base_path.back() == '/') t.base_path.pop_back();
  return t;
}

absl::Status QueryOpenAiModel(OpenAiTarget& t, int32_t timeout_s) {
  try {
    net::io_context io;
    beast::tcp_stream stream = Connect(io, t, timeout_s);
    http::request<http::empty_body> req(http::verb::get, t.base_path + "/models", 11);
    req.set(http::field::host, t.host);
    if (!t.api_key.empty()) req.set(http::field::authorization, "Bearer " + t.api_key);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    const json body = json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
    if (res.result_int() != 200 || body.is_discarded() || !body.contains("data") ||
        !body["data"].is_array() || body["data"].empty()) {
      return absl::UnavailableError(absl::StrFormat(
          "GET %s/models on %s:%s answered %d without a model", t.base_path, t.host, t.port,
          res.result_int()));
    }
    const json& first = body["data"][0];
    if (t.model.empty()) t.model = first.value("id", "");
    if (first.contains("max_model_len") && first["max_model_len"].is_number_integer()) {
      t.context_length = first["max_model_len"].get<int32_t>();
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrFormat("cannot reach the server at %s:%s: %s", t.host, t.port, e.what()));
  }
}

RequestRecord RunOpenAiRequest(const OpenAiTarget& t, const JsonRequest& request,
                               int32_t timeout_s) {
  RequestRecord rec;
  const Clock::time_point start = Clock::now();
  try {
    net::io_context io;
    beast::tcp_stream stream = Connect(io, t, timeout_s);
    http::request<http::string_body> req(http::verb::post, t.base_path + "/completions", 11);
    req.set(http::field::host, t.host);
    req.set(http::field::content_type, "application/json");
    if (!t.api_key.empty()) req.set(http::field::authorization, "Bearer " + t.api_key);
    req.body() = Payload(t, request).dump();
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(stream, buffer, parser);
    if (parser.get().result_int() != 200) {
      http::response_parser<http::string_body> rest(std::move(parser));
      beast::error_code ec;
      http::read(stream, buffer, rest, ec);
      rec.error = absl::StrFormat("HTTP %d: %s", rest.get().result_int(), rest.get().body());
    } else {
      ReadEvents(stream, buffer, parser, start, rec);
    }
  } catch (const std::exception& e) {
    rec.error = e.what();
  }
  rec.e2e_s = Seconds(Clock::now() - start);
  if (rec.input_tokens == 0 && request.prompt_token_ids) {
    rec.input_tokens = static_cast<int64_t>(request.prompt_token_ids->size());
  }
  rec.ok = rec.error.empty();
  return rec;
}

}  // namespace tandem::client
