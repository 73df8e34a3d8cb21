// `pattern` on terminal_send and terminal_wait: an RE2 regular expression matched against each
// rendered output line since the write. RE2 runs in time linear in the text and bounded memory
// whatever the pattern (no backtracking, no recursion), so neither a hostile pattern nor a
// hostile line can stall the reactor or overflow its stack (std::regex can do both).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backend/contract_types.h"
#include "common/error.h"

namespace re2 {
class RE2;
}

namespace ptybox::backend {

inline constexpr size_t kMaxPatternBytes = 1024;
// Each line is matched on its first 8 KiB: the work per output event stays bounded when a
// program prints a megabyte without a newline.
inline constexpr size_t kMaxPatternLineBytes = 8 * 1024;
// RE2 is linear in the text, but its factor is the program's size once the DFA's cache
// overflows and it falls back to the NFA (`[ab]*a[ab]{999}c` on random a/b lines: ~85 ms per
// 8 KiB line on this 2-core machine). Larger programs are refused at compile, and the matching
// of one send or wait may use the reactor for at most kPatternMatchBudget in all; past it the
// pattern is no longer matched and the call settles by the other rules (docs/protocol.md).
inline constexpr int kMaxPatternProgramSize = 5000;
inline constexpr std::chrono::milliseconds kPatternMatchBudget{250};
// match.text and match.line are cut to this (whole characters).
inline constexpr size_t kMaxMatchBytes = 1024;

class OutputPattern final {
 public:
  // kInvalidParams (what failed to compile, and why) for a pattern RE2 refuses or one longer
  // than kMaxPatternBytes.
  [[nodiscard]] static Result<std::shared_ptr<const OutputPattern>> Compile(
      std::string_view pattern);
  ~OutputPattern();
  OutputPattern(const OutputPattern&) = delete;
  OutputPattern& operator=(const OutputPattern&) = delete;

  // The first match in `line` (its first kMaxPatternLineBytes), or nullopt.
  [[nodiscard]] std::optional<PatternMatch> Find(std::string_view line) const;

 private:
  explicit OutputPattern(std::unique_ptr<re2::RE2> re);
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace ptybox::backend
