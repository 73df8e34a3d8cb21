#include "backend/readiness/output_pattern.h"

#include <re2/re2.h>

#include <algorithm>

namespace ptybox::backend {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// The first `size` bytes of `text`, not splitting a UTF-8 character.
std::string_view CharPrefix(std::string_view text, size_t size) {
  if (text.size() <= size) return text;
  while (size > 0 && IsContinuation(text[size])) --size;
  return text.substr(0, size);
}

// Longest RE2 program memory: the default; a pattern that needs more is refused at compile.
constexpr int64_t kMaxPatternMemory = 8 << 20;

}  // namespace

OutputPattern::OutputPattern(std::unique_ptr<re2::RE2> re) : re_(std::move(re)) {}
OutputPattern::~OutputPattern() = default;

Result<std::shared_ptr<const OutputPattern>> OutputPattern::Compile(std::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return Fail(ErrorKind::kInvalidParams,
                "pattern is " + std::to_string(pattern.size()) + " bytes; at most " +
                    std::to_string(kMaxPatternBytes) + " are allowed",
                "pattern");
  }
  if (pattern.empty()) {
    return Fail(ErrorKind::kInvalidParams, "pattern is empty; give a regular expression",
                "pattern");
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxPatternMemory);
  auto re = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    return Fail(ErrorKind::kInvalidParams,
                "pattern does not compile as an RE2 regular expression: " + re->error() +
                    " (RE2 syntax: https://github.com/google/re2/wiki/Syntax; no backreferences "
                    "or lookaround)",
                "pattern");
  }
  const int program = std::max(re->ProgramSize(), re->ReverseProgramSize());
  if (program > kMaxPatternProgramSize) {
    return Fail(ErrorKind::kInvalidParams,
                "pattern is too complex: it compiles to " + std::to_string(program) +
                    " RE2 instructions, at most " + std::to_string(kMaxPatternProgramSize) +
                    " are allowed (counted repetitions such as {1000} multiply the size: "
                    "match less, e.g. a shorter bound or `.*`)",
                "pattern");
  }
  return std::shared_ptr<const OutputPattern>(new OutputPattern(std::move(re)));
}

std::optional<PatternMatch> OutputPattern::Find(std::string_view line) const {
  const std::string_view text = CharPrefix(line, kMaxPatternLineBytes);
  re2::StringPiece match;
  if (!re_->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), re2::RE2::UNANCHORED,
                  &match, 1)) {
    return std::nullopt;
  }
  PatternMatch found;
  found.text =
      std::string(CharPrefix(std::string_view(match.data(), match.size()), kMaxMatchBytes));
  found.line = std::string(CharPrefix(text, kMaxMatchBytes));
  return found;
}

}  // namespace ptybox::backend
