#include "coordinator/http/openai_error.h"

#include "absl/strings/ascii.h"
#include "coordinator/http/openai_response.h"

namespace tandem::coordinator::http {
namespace {

// OpenAI's error types by status.
const char* ErrorType(int status) {
  switch (status) {
    case 400:
    case 413:
    case 431: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return "server_error";
  }
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

nlohmann::json ErrorJson(int status, std::string_view message, std::string_view param) {
  return {{"error",
           {{"message", message},
            {"type", ErrorType(status)},
            {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
            {"code", status}}}};
}

HttpResponse ErrorResponse(int status, std::string_view message, std::string_view param) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(ErrorJson(status, message, param));
  return r;
}

std::string ParamOfMessage(std::string_view message) {
  size_t end = 0;
  while (end < message.size() &&
         (absl::ascii_islower(message[end]) || message[end] == '_' || message[end] == '.')) {
    ++end;
  }
  // A field name is followed by its value or a colon ("n 0 is out of ...").
  if (end == 0 || end == message.size() || (message[end] != ' ' && message[end] != ':')) return "";
  const std::string_view word = message.substr(0, end);
  if (word == "the" || word == "no") return "";
  return std::string(word);
}

HttpResponse ErrorResponseOf(const absl::Status& status) {
  const int code = HttpStatusOf(status.code());
  return ErrorResponse(code, std::string(status.message()),
                       code == 400 ? ParamOfMessage(std::string(status.message())) : std::string());
}

}  // namespace tandem::coordinator::http
