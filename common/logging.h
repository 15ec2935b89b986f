// Minimal logging and CHECK for tandem (Debian's Abseil predates absl/log).
// Logs go to stderr; CHECK aborts on programmer bugs only (DESIGN.md "Errors").
#ifndef TANDEM_COMMON_LOGGING_H_
#define TANDEM_COMMON_LOGGING_H_

#include <string_view>

#include "absl/strings/str_format.h"

namespace tandem {

enum class LogLevel { kVerbose = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the lowest level that is printed (default kInfo, or the environment
// variable TANDEM_LOG_LEVEL=verbose|info|warning|error). Thread-safe.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
// Writes one line "[I hh:mm:ss.mmm file:line] message" to stderr. Thread-safe.
void LogLine(LogLevel level, const char* file, int line, std::string_view message);
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              std::string_view message);

}  // namespace tandem

#define TANDEM_LOG(level, ...)                                                  \
  do {                                                                          \
    if (::tandem::LogEnabled(::tandem::LogLevel::level))                        \
      ::tandem::LogLine(::tandem::LogLevel::level, __FILE__, __LINE__,          \
                        ::absl::StrFormat(__VA_ARGS__));                        \
  } while (0)

// CHECK(cond) / CHECK(cond, "fmt", args...): aborts with a message when a
// programmer invariant is broken. Never used for bad input.
#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) [[unlikely]]                                                   \
      ::tandem::CheckFailed(__FILE__, __LINE__, #cond,                          \
                            ::absl::StrFormat("" __VA_ARGS__));                 \
  } while (0)

#endif  // TANDEM_COMMON_LOGGING_H_
