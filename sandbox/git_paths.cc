#include "sandbox/git_paths.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace ptybox::sandbox {
namespace {

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `text` from `at` to its end, or to a ':' (an NTFS stream), is only dots and spaces:
// what NTFS drops from the end of a name.
bool OnlyNtfsTrailer(std::string_view text, size_t at) {
  for (; at < text.size() && text[at] != ':'; ++at) {
    if (text[at] != '.' && text[at] != ' ') return false;
  }
  return true;
}

bool StartsWithIgnoringCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (Lower(text[i]) != prefix[i]) return false;
  }
  return true;
}

// NTFS's reading of `component` as `.<name>` (`name` lower case): itself with a trailer, its
// regular short name (the first six characters, `~1` to `~4`), or the short name Windows falls
// back to (`short_prefix`, six characters, then `~` and a number).
bool NtfsNames(std::string_view component, std::string_view name, std::string_view short_prefix) {
  if (!component.empty() && component[0] == '.' &&
      StartsWithIgnoringCase(component.substr(1), name)) {
    return OnlyNtfsTrailer(component, 1 + name.size());
  }
  if (name.size() >= 6 && component.size() >= 8 &&
      StartsWithIgnoringCase(component, name.substr(0, 6)) && component[6] == '~' &&
      component[7] >= '1' && component[7] <= '4') {
    return OnlyNtfsTrailer(component, 8);
  }
  // The fall-back: up to six characters of the prefix, then `~N` (N from 1, digits after).
  size_t i = 0;
  for (; i < component.size() && i < 6 && component[i] != '~'; ++i) {
    if (Lower(component[i]) != short_prefix[i]) return false;
  }
  if (i >= component.size() || component[i] != '~') return false;
  ++i;
  if (i >= component.size() || component[i] < '1' || component[i] > '9') return false;
  ++i;
  for (; i < component.size() && i < 8; ++i) {
    if (component[i] < '0' || component[i] > '9') return false;
  }
  return i == 8 && OnlyNtfsTrailer(component, 8);
}

// One code point of UTF-8 at `at`, advancing it; nullopt when the bytes are not UTF-8.
std::optional<uint32_t> NextCodePoint(std::string_view text, size_t& at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  size_t length = 0;
  uint32_t value = 0;
  if (lead < 0x80) {
    ++at;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    value = lead & 0x07;
  } else {
    return std::nullopt;
  }
  if (at + length > text.size()) return std::nullopt;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return std::nullopt;
    value = (value << 6) | (byte(at + i) & 0x3F);
  }
  at += length;
  return value;
}

// The code points HFS+ leaves out of a name when it compares it.
bool HfsIgnores(uint32_t c) {
  return (c >= 0x200C && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x206A && c <= 0x206F) || c == 0xFEFF;
}

// HFS+'s reading of `component` as `.<name>` (`name` lower case ASCII): the code points it does
// not ignore are exactly those, in any case. Bytes that are not UTF-8 end the name, as in git's
// reading: a match when the whole name came before them. Overlong forms decode (stricter than
// git, which refuses them as not UTF-8).
bool HfsNames(std::string_view component, std::string_view name) {
  size_t at = 0;
  size_t matched = 0;  // of '.' + name
  while (at < component.size()) {
    std::optional<uint32_t> c = NextCodePoint(component, at);
    if (!c) return matched == name.size() + 1;
    if (HfsIgnores(*c)) continue;
    if (matched == name.size() + 1) return false;  // more than the name
    const char expected = matched == 0 ? '.' : name[matched - 1];
    if (*c > 127 || Lower(static_cast<char>(*c)) != expected) return false;
    ++matched;
  }
  return matched == name.size() + 1;
}

struct DotFile {
  std::string_view name;          // without its dot
  std::string_view short_prefix;  // Windows' fall-back 8.3 name's first six characters
};
// The short prefixes are what Windows derives from each name (git's own table).
constexpr std::array<DotFile, 4> kConfigurationFiles{{
    {"gitmodules", "gi7eba"},
    {"gitattributes", "gi7d29"},
    {"gitignore", "gi250a"},
    {"mailmap", "maba30"},
}};

}  // namespace

bool GitNamesDotGit(std::string_view component) {
  // `.git` has no six-character short form of its own: Windows names it `git~1`.
  if (StartsWithIgnoringCase(component, "git~1") && OnlyNtfsTrailer(component, 5)) return true;
  if (!component.empty() && component[0] == '.' &&
      StartsWithIgnoringCase(component.substr(1), "git") && OnlyNtfsTrailer(component, 4)) {
    return true;
  }
  return HfsNames(component, "git");
}

bool GitNamesConfigurationFile(std::string_view component) {
  for (const DotFile& file : kConfigurationFiles) {
    if (NtfsNames(component, file.name, file.short_prefix) || HfsNames(component, file.name)) {
      return true;
    }
  }
  return false;
}

}  // namespace ptybox::sandbox
