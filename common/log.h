// Logging to standard error only (standard output may be a protocol stream). One line per
// call, prefixed with the level; the level threshold comes from PTYBOX_LOG (error|warn|info|debug).
#pragma once

#include <string_view>

namespace ptybox {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, std::string_view message);

inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogDebug(std::string_view m) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, m);
}

}  // namespace ptybox
