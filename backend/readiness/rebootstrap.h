// Giving ptybox's prompt hook back to a shell that replaced itself (`exec bash`, `exec $SHELL`,
// `exec bash -l`): the new bash keeps the pid, the terminal and the session, but starts from its
// own rc files, without the hook and without the nonce. The daemon types the bootstrap into it
// (BuildRebootstrapLine, no secret in it) only when one look proves that nothing but that shell
// can read it: the shell's own main task alone in the foreground group, blocked reading the
// terminal in readline, no other live process anywhere in the session (no one else could read
// the terminal, be forked to, or hold a descriptor of the shell), nothing unread. The fresh
// nonce then goes over a connection the shell itself opens (backend/readiness/rekey.h), never
// the terminal. The decisions are pure functions of the facts (unit-tested); ShellSession runs
// the steps. docs/readiness.md, "exec bash".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/readiness/foreground_inspector.h"

namespace ptybox::backend {

// What tells one program image of a process from the next: exec keeps the pid and the start time
// but maps a new stack and new argument and environment areas (randomized by the kernel), and
// may run another file. Fields 28 (startstack), 48 (arg_start) and 50 (env_start) of
// /proc/<pid>/stat (shown to a reader with ptrace access: the daemon), and the executable's
// device, inode, owner and mode (stat of /proc/<pid>/exe, host ids).
struct ExecIdentity {
  uint64_t start_stack = 0;
  uint64_t arg_start = 0;
  uint64_t env_start = 0;
  dev_t exe_dev = 0;
  ino_t exe_ino = 0;
  uid_t exe_uid = 0;
  mode_t exe_mode = 0;
  bool operator==(const ExecIdentity&) const = default;
};

// Parses the address fields of a /proc/<pid>/stat line; nullopt when malformed or hidden (0).
[[nodiscard]] std::optional<ExecIdentity> ParseExecAddresses(std::string_view stat_line);
// Reads the identity of `pid` now; nullopt when anything cannot be read.
[[nodiscard]] std::optional<ExecIdentity> ReadExecIdentity(pid_t pid);

// A file's device and inode (the file the session's first shell runs: `exec bash` must run it).
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

// Whether a process exec'd from the file `exe` describes runs non-dumpable whatever it is:
// host root's and readable by nobody (the unreadable copy a root daemon's confined sessions
// run, sandbox/mount_stage.h), so the session's id (no capabilities) can neither read it nor
// change its mode, and the kernel makes every image of it non-dumpable.
[[nodiscard]] bool RunsUnreadable(const ExecIdentity& exe);

// Empty when `facts` (one look, unread input counted before it) prove the shell `shell` alone
// can read the bootstrap line written now, with readline waiting for a line (raw mode);
// otherwise why not (for the debug log).
[[nodiscard]] std::optional<std::string> RebootstrapRefusal(const ForegroundFacts& facts,
                                                            pid_t shell);

}  // namespace ptybox::backend
