// Which answers of the terminal emulator may be written back to a session's terminal: only the
// fixed report shapes libvterm produces (cursor position, device status and attributes, mode
// reports), never a byte a program chose beyond a number.
#pragma once

#include <string>
#include <string_view>

namespace ptybox::backend {

// Keeps, in order, every whole reply of these shapes and drops everything else:
//   ESC [ <digits and ;> R        cursor position report (DSR 6)
//   ESC [ ? <digits and ;> R      extended cursor position report (DECXCPR)
//   ESC [ [?] <digits> n          device status (DSR 5)
//   ESC [ ? <digits and ;> c      primary device attributes
//   ESC [ > <digits and ;> c      secondary device attributes
//   ESC [ ? <digits and ;> $ y    mode report (DECRQM); the mode number is the program's
// A reply that would carry a program's text (libvterm answers DECRQSS with the request echoed)
// or 8-bit controls (after S8C1T) does not pass: such bytes, read by the shell as typed input,
// would be a command line a program wrote.
[[nodiscard]] std::string KeepKnownReplies(std::string_view replies);

}  // namespace ptybox::backend
