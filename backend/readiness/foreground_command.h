// What is still running when a send did not settle at the prompt: the terminal's foreground
// process group and its leader's command line, as a model reads it (SendResult::foreground).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ptybox::backend {

inline constexpr size_t kMaxForegroundCommandBytes = 256;

// A raw /proc/PID/cmdline as one line of text: NULs (argument separators) become spaces, other
// control characters too, trailing separators go, invalid UTF-8 becomes U+FFFD, and the result
// is at most kMaxForegroundCommandBytes (whole characters, "..." marking a cut). A program sets
// its own cmdline: it is hostile text, bounded and printable here.
[[nodiscard]] std::string CommandLineText(std::string_view raw);

// The command line of host process `pid` (the group leader), from /proc; "" when it is gone or
// unreadable (a zombie leader has an empty cmdline).
[[nodiscard]] std::string ReadCommandLine(pid_t pid);

}  // namespace ptybox::backend
