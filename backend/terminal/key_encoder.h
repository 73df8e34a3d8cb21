// Named keys (terminal_send `keys`): tmux-style key names and literal strings, encoded as the
// bytes an xterm (TERM=xterm-256color) sends for them in the terminal's current mode.
//
// An entry that is exactly a key name ("Enter", "C-c", "M-x", "Up", "F5") is that key; an entry
// that looks like a key name but is none ("C-Foo", "F13", "enter") is refused with an error
// naming it and listing the valid names; any other entry is literal text, sent as is (":q!",
// "ls -l"). Modifiers: C- (control), M- (meta: ESC first), S- (shift), in any order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace ptybox::backend {

// What the terminal's modes change in the encoding.
struct KeyModes {
  bool application_cursor = false;  // DECCKM (CSI ? 1 h): Up is ESC O A, not ESC [ A
};

// Every key name without modifiers, for messages and docs.
const std::vector<std::string>& KeyNames();

// The bytes for one entry; kInvalidParams naming `entry` for a key-like name that is no key.
Result<std::string> EncodeKey(std::string_view entry, const KeyModes& modes);
// The bytes for every entry in order; the first bad entry is named with its index
// ("keys[2]").
Result<std::string> EncodeKeys(const std::vector<std::string>& entries, const KeyModes& modes);

}  // namespace ptybox::backend
