// Errors of the OpenAI-compatible API in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}, and the HTTP status of
// each absl::Status code (the HTTP edge's counterpart of common/grpc/grpc_status).
#ifndef TANDEM_COORDINATOR_HTTP_OPENAI_ERROR_H_
#define TANDEM_COORDINATOR_HTTP_OPENAI_ERROR_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/http/http_session.h"
#include "nlohmann/json.hpp"

namespace tandem::coordinator::http {

// INVALID_ARGUMENT 400, NOT_FOUND 404, RESOURCE_EXHAUSTED 429, UNAVAILABLE
// 503, DEADLINE_EXCEEDED 504, CANCELLED 499 (client closed), else 500.
int HttpStatusOf(absl::StatusCode code);

// The error object; `param` (the offending field) null when empty.
nlohmann::json ErrorJson(int status, std::string_view message, std::string_view param = "");

// A complete error response.
HttpResponse ErrorResponse(int status, std::string_view message, std::string_view param = "");

// The error response of a failed `status`; `param` is the request field its
// message starts with ("temperature -1 is out of range ..."), if any.
HttpResponse ErrorResponseOf(const absl::Status& status);

// The request field an error message names first, or "".
std::string ParamOfMessage(std::string_view message);

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_OPENAI_ERROR_H_
