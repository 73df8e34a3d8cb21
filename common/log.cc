#include "common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ptybox {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("PTYBOX_LOG");
  if (v == nullptr) return LogLevel::kWarn;
  std::string_view s(v);
  if (s == "error") return LogLevel::kError;
  if (s == "info") return LogLevel::kInfo;
  if (s == "debug") return LogLevel::kDebug;
  return LogLevel::kWarn;
}

LogLevel& Threshold() {
  static LogLevel level = LevelFromEnv();
  return level;
}

}  // namespace

void SetLogLevel(LogLevel level) { Threshold() = level; }
bool LogEnabled(LogLevel level) { return level <= Threshold(); }

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  static constexpr std::string_view kNames[] = {"error", "warn", "info", "debug"};
  std::string line = "ptybox: ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += message;
  line += '\n';
  // One write per line so concurrent writers do not interleave within a line.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ptybox
