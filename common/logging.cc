#include "common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace tandem {
namespace {
// TANDEM_LOG_LEVEL=verbose|info|warning|error sets the start-up level.
int LevelFromEnvironment() {
  const char* v = std::getenv("TANDEM_LOG_LEVEL");
  if (v == nullptr) return static_cast<int>(LogLevel::kInfo);
  if (std::strcmp(v, "verbose") == 0) return static_cast<int>(LogLevel::kVerbose);
  if (std::strcmp(v, "warning") == 0) return static_cast<int>(LogLevel::kWarning);
  if (std::strcmp(v, "error") == 0) return static_cast<int>(LogLevel::kError);
  return static_cast<int>(LogLevel::kInfo);
}

std::atomic<int> g_min_level{LevelFromEnvironment()};

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

void SetLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(); }

void LogLine(LogLevel level, const char* file, int line, std::string_view message) {
  static constexpr char kLetters[] = {'V', 'I', 'W', 'E'};
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm_utc;
  gmtime_r(&secs, &tm_utc);
  // One fprintf per line so concurrent lines do not interleave.
  std::fprintf(stderr, "[%c %02d:%02d:%02d.%03d %s:%d] %.*s\n", kLetters[static_cast<int>(level)],
               tm_utc.tm_hour, tm_utc.tm_min, tm_utc.tm_sec, millis, Basename(file), line,
               static_cast<int>(message.size()), message.data());
}

void CheckFailed(const char* file, int line, const char* condition, std::string_view message) {
  std::fprintf(stderr, "[F %s:%d] CHECK failed: %s %.*s\n", Basename(file), line, condition,
               static_cast<int>(message.size()), message.data());
  std::abort();
}

}  // namespace tandem
