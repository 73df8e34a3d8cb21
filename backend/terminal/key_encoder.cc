#include "backend/terminal/key_encoder.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>

#include "common/join.h"

namespace ptybox::backend {
namespace {

// How a named key is encoded.
enum class Form {
  kBytes,   // fixed bytes; M- prefixes ESC, C- and S- do not apply
  kCursor,  // ESC [ <final> (normal) or ESC O <final> (application cursor); modified:
            // ESC [ 1 ; <m> <final>
  kSs3,     // ESC O <final> (F1-F4); modified: ESC [ 1 ; <m> <final>
  kTilde,   // ESC [ <n> ~; modified: ESC [ <n> ; <m> ~
};

struct NamedKey {
  std::string_view name;
  Form form;
  std::string_view bytes;  // kBytes
  char final = 0;          // kCursor, kSs3
  int number = 0;          // kTilde
};

constexpr std::array<NamedKey, 32> kKeys = {{
    {"Enter", Form::kBytes, "\r"},        {"Tab", Form::kBytes, "\t"},
    {"BTab", Form::kBytes, "\x1b[Z"},     {"BSpace", Form::kBytes, "\x7f"},
    {"Escape", Form::kBytes, "\x1b"},     {"Space", Form::kBytes, " "},
    {"Up", Form::kCursor, {}, 'A'},       {"Down", Form::kCursor, {}, 'B'},
    {"Right", Form::kCursor, {}, 'C'},    {"Left", Form::kCursor, {}, 'D'},
    {"Home", Form::kCursor, {}, 'H'},     {"End", Form::kCursor, {}, 'F'},
    {"IC", Form::kTilde, {}, 0, 2},       {"Insert", Form::kTilde, {}, 0, 2},
    {"DC", Form::kTilde, {}, 0, 3},       {"Delete", Form::kTilde, {}, 0, 3},
    {"PageUp", Form::kTilde, {}, 0, 5},   {"PPage", Form::kTilde, {}, 0, 5},
    {"PageDown", Form::kTilde, {}, 0, 6}, {"NPage", Form::kTilde, {}, 0, 6},
    {"F1", Form::kSs3, {}, 'P'},          {"F2", Form::kSs3, {}, 'Q'},
    {"F3", Form::kSs3, {}, 'R'},          {"F4", Form::kSs3, {}, 'S'},
    {"F5", Form::kTilde, {}, 0, 15},      {"F6", Form::kTilde, {}, 0, 17},
    {"F7", Form::kTilde, {}, 0, 18},      {"F8", Form::kTilde, {}, 0, 19},
    {"F9", Form::kTilde, {}, 0, 20},      {"F10", Form::kTilde, {}, 0, 21},
    {"F11", Form::kTilde, {}, 0, 23},     {"F12", Form::kTilde, {}, 0, 24},
}};

const NamedKey* Find(std::string_view name) {
  auto it = std::find_if(kKeys.begin(), kKeys.end(),
                         [&](const NamedKey& key) { return key.name == name; });
  return it == kKeys.end() ? nullptr : &*it;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

struct Modifiers {
  bool control = false;
  bool meta = false;
  bool shift = false;
  [[nodiscard]] bool any() const { return control || meta || shift; }
  // xterm's modifier parameter: 1 + shift + 2 alt + 4 control.
  [[nodiscard]] int Parameter() const {
    return 1 + (shift ? 1 : 0) + (meta ? 2 : 0) + (control ? 4 : 0);
  }
};

// Strips C-, M- and S- prefixes; `rest` is what follows. False when there is none.
bool StripModifiers(std::string_view& rest, Modifiers& mods) {
  bool found = false;
  while (rest.size() > 2 && rest[1] == '-') {
    if (rest[0] == 'C') {
      mods.control = true;
    } else if (rest[0] == 'M') {
      mods.meta = true;
    } else if (rest[0] == 'S') {
      mods.shift = true;
    } else {
      break;
    }
    rest.remove_prefix(2);
    found = true;
  }
  return found;
}

std::string NameList() { return Join(KeyNames()); }

Error Unknown(std::string_view entry, std::string_view why) {
  std::string shown(entry.substr(0, 64));
  if (entry.size() > 64) shown += "...";
  return Error{ErrorKind::kInvalidParams,
               "unknown key \"" + shown + "\"" + std::string(why) + "; key names: " + NameList() +
                   ", with C-, M- or S- before a key or one character (C-c, M-x, S-Tab); any "
                   "other entry is typed as text, and \"input\" types anything verbatim",
               std::string(entry)};
}

// A single character with modifiers: C- makes a control character, S- an upper-case letter,
// M- puts ESC first.
Result<std::string> EncodeCharacter(std::string_view entry, char c, const Modifiers& mods) {
  if (mods.shift) {
    if (std::isalpha(static_cast<unsigned char>(c)) == 0) {
      return std::unexpected(Unknown(entry, " (S- applies to letters and named keys)"));
    }
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (mods.control) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower >= 'a' && lower <= 'z') {
      c = static_cast<char>(lower - 'a' + 1);
    } else if (c == '@' || c == ' ' || c == '2') {
      c = '\0';
    } else if (c >= '[' && c <= '_') {
      c = static_cast<char>(c - '@');
    } else if (c == '?') {
      c = '\x7f';
    } else {
      return std::unexpected(Unknown(entry, " (C- applies to a letter, Space or one of @[\\]^_?)"));
    }
  }
  std::string out = mods.meta ? "\x1b" : "";
  out.push_back(c);
  return out;
}

Result<std::string> EncodeNamed(std::string_view entry, const NamedKey& key, const Modifiers& mods,
                                const KeyModes& modes) {
  const std::string csi = "\x1b[";
  switch (key.form) {
    case Form::kBytes: {
      if (key.name == "Space") return EncodeCharacter(entry, ' ', mods);
      if (key.name == "Tab" && mods.shift && !mods.control) {
        return std::string(mods.meta ? "\x1b" : "") + "\x1b[Z";
      }
      if (mods.control || mods.shift) {
        return std::unexpected(
            Unknown(entry, " (only M- applies to " + std::string(key.name) + ")"));
      }
      return std::string(mods.meta ? "\x1b" : "") + std::string(key.bytes);
    }
    case Form::kCursor:
      if (mods.any()) return csi + "1;" + std::to_string(mods.Parameter()) + key.final;
      return std::string(modes.application_cursor ? "\x1bO" : "\x1b[") + key.final;
    case Form::kSs3:
      if (mods.any()) return csi + "1;" + std::to_string(mods.Parameter()) + key.final;
      return std::string("\x1bO") + key.final;
    case Form::kTilde:
      if (mods.any()) {
        return csi + std::to_string(key.number) + ";" + std::to_string(mods.Parameter()) + "~";
      }
      return csi + std::to_string(key.number) + "~";
  }
  return std::string();
}

// "F" followed by digits: a function key name.
bool LooksLikeFunctionKey(std::string_view text) {
  return text.size() >= 2 && text[0] == 'F' &&
         std::all_of(text.begin() + 1, text.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

const std::vector<std::string>& KeyNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const NamedKey& key : kKeys) names.emplace_back(key.name);
    return names;
  }();
  return kNames;
}

Result<std::string> EncodeKey(std::string_view entry, const KeyModes& modes) {
  if (const NamedKey* key = Find(entry)) return EncodeNamed(entry, *key, Modifiers{}, modes);
  std::string_view rest = entry;
  Modifiers mods;
  if (StripModifiers(rest, mods)) {
    if (const NamedKey* key = Find(rest)) return EncodeNamed(entry, *key, mods, modes);
    // One character: a byte, or one UTF-8 character under M- only.
    if (rest.size() == 1) return EncodeCharacter(entry, rest[0], mods);
    return std::unexpected(Unknown(entry, ""));
  }
  if (LooksLikeFunctionKey(entry)) return std::unexpected(Unknown(entry, " (F1 to F12)"));
  for (const std::string& name : KeyNames()) {
    if (EqualsIgnoringCase(entry, name)) {
      return std::unexpected(
          Unknown(entry, " (key names are case-sensitive: did you mean \"" + name + "\"?)"));
    }
  }
  return std::string(entry);  // literal text
}

Result<std::string> EncodeKeys(const std::vector<std::string>& entries, const KeyModes& modes) {
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<std::string> bytes = EncodeKey(entries[i], modes);
    if (!bytes) {
      Error error = bytes.error();
      error.message = "keys[" + std::to_string(i) + "]: " + error.message;
      error.context = "keys[" + std::to_string(i) + "]";
      return std::unexpected(std::move(error));
    }
    out += *bytes;
  }
  return out;
}

}  // namespace ptybox::backend
