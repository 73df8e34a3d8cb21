// `ptybox ls`: the sessions an owner holds (terminal_list's shape, from owner_sessions or
// terminal_list) as a table a person reads. Names come from clients and are printed as one
// printable line each (common/untrusted_text.h), never as terminal controls.
#pragma once

#include <string>

#include "runtime/params.h"

namespace ptybox::runtime {

// "running", "exited 0", "killed by SIGKILL": a sessionStatus for a person.
[[nodiscard]] std::string StatusText(const Json& status);
// One header line, then one line per session: SESSION NAME MODE BUSY STATUS, aligned; or a line
// saying there is none.
[[nodiscard]] std::string SessionTable(const Json& sessions);

}  // namespace ptybox::runtime
