// Giving ptybox's prompt hook back to a shell that replaced itself (`exec bash`, `exec $SHELL`,
// `exec bash -l`): the new bash keeps the pid, the terminal and the session, but starts from its
// own rc files, without the hook and without the nonce. The daemon types the bootstrap into it
// (BuildRebootstrapLine) and then writes a fresh nonce line, each only when one look proves that
// nothing but that shell can read it: the shell's own main task alone in the foreground group,
// blocked reading the terminal, no other live process anywhere in the session (no one else could
// read the terminal, or be forked to), nothing unread. The decisions are pure functions of the
// facts (unit-tested); ShellSession runs the steps. docs/readiness.md, "exec bash".
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
// device and inode (stat of /proc/<pid>/exe).
struct ExecIdentity {
  uint64_t start_stack = 0;
  uint64_t arg_start = 0;
  uint64_t env_start = 0;
  dev_t exe_dev = 0;
  ino_t exe_ino = 0;
  bool operator==(const ExecIdentity&) const = default;
};

// Parses the address fields of a /proc/<pid>/stat line; nullopt when malformed or hidden (0).
[[nodiscard]] std::optional<ExecIdentity> ParseExecAddresses(std::string_view stat_line);
// Reads the identity of `pid` now; nullopt when anything cannot be read.
[[nodiscard]] std::optional<ExecIdentity> ReadExecIdentity(pid_t pid);

// Device and inode of `program` found through `path` (a PATH list) on this host, or of `program`
// itself when it has a slash; nullopt when not found. The sandboxes bind the host's /usr, so
// the same file has the same identity inside.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};
[[nodiscard]] std::optional<FileIdentity> FindProgram(std::string_view program,
                                                      std::string_view path);

// Whether a /proc/<pid>/cmdline (NUL-separated) is that of a bash the exec machinery started
// (prompt_protocol.h, BuildExecRc): any argv[0], then exactly `--rcfile /proc/self/fd/<rc fd> -i`.
// Such an image installs the hook itself, with the nonce the daemon already follows.
[[nodiscard]] bool IsExecMachineryCommandLine(std::string_view cmdline);
// The same, read for `pid` now; false when unreadable.
[[nodiscard]] bool RunsAsExecMachinery(pid_t pid);

enum class RebootstrapStep {
  kTypeLine,    // readline waits for a line (raw mode): the bootstrap line goes in
  kWriteNonce,  // the bootstrap's `read` waits (canonical mode): the nonce line goes in
};

// Empty when `facts` (one look, unread input counted before it) prove the shell `shell` alone
// can read what is written now for `step`; otherwise why not (for the debug log).
[[nodiscard]] std::optional<std::string> RebootstrapRefusal(RebootstrapStep step,
                                                            const ForegroundFacts& facts,
                                                            pid_t shell);

}  // namespace ptybox::backend
