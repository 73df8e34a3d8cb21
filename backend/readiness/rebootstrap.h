// Giving ptybox's prompt hook back to a shell that replaced itself around the exec machinery
// (`exec $SHELL`, `exec /bin/bash`, `builtin exec bash`): the new bash keeps the pid, the
// terminal and the session, but starts from its own rc files, without the hook and without the
// nonce. The daemon types a short loader into it (BuildRebootstrapLine, which holds no nonce)
// when one look proves nothing but that shell reads the terminal: the shell's own main task alone
// in the foreground group, blocked reading the terminal, no other live process anywhere in the
// session, nothing unread. The loader makes a pipe in the shell's own process; the daemon writes
// the fresh nonce and the bootstrap into it through /proc/<shell>/fd/ when a second look finds
// the shell alone in the session and the pipe new. The nonce never crosses the terminal. The
// decisions are pure functions of the facts (unit-tested); ShellSession runs the steps.
// docs/readiness.md, "exec bash".
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

// Empty when `facts` (one look, unread input counted before it) prove that the shell `shell`
// alone can read a line written to the terminal now, and that readline (raw mode) reads it;
// otherwise why not (for the debug log).
[[nodiscard]] std::optional<std::string> TypeLineRefusal(const ForegroundFacts& facts, pid_t shell);

// Empty when `facts` prove that the shell `shell` is the only process of the session (its main
// task alone in its group, asleep, and not waiting on the terminal: in the bootstrap's read of
// its pipe), with the whole typed line read; otherwise why not.
[[nodiscard]] std::optional<std::string> PullRefusal(const ForegroundFacts& facts, pid_t shell);

// Empty when the session's cgroup counts (`session_tasks`, pids.current) exactly the tasks of
// the chain the walk saw (`facts.chain_processes`: the shell and its ancestors, one task each):
// no process or thread the walk could not see (a thread whose process's leader exited and shows
// as a zombie, a job that forks and exits between the walk's reads) lives in the session. A
// session without a pids cgroup refuses.
[[nodiscard]] std::optional<std::string> TaskCountRefusal(const ForegroundFacts& facts,
                                                          std::optional<size_t> session_tasks);

// Empty when a new image of bash at the shell's pid was started as an interactive shell that
// reads only its own startup files, as `exec $SHELL`, `exec bash -l` or `builtin exec bash` start
// it: `cmdline` (NUL-separated) holds, after argv[0], only -i, -l, --login, --norc, --noprofile
// (no script, no -c, no other option); `environ` (NUL-separated) has no exported function
// (BASH_FUNC_), nothing of the dynamic loader (LD_) and none of the variables that make bash run
// or trace code at its start or before a prompt. An image a program started that way (`exec
// python3 wrap.py` starting bash with an `eval` function, `exec bash script`) is not typed into:
// its exit codes stay null. (A program can still plant ~/.bashrc, which every bash sources: the
// open limit of code sourced into the shell, docs/security.md.)
[[nodiscard]] std::optional<std::string> ImageRefusal(std::string_view cmdline,
                                                      std::string_view environ);
// Reads /proc/<pid>/<name> whole; nullopt when it cannot be read, or is longer than 4 MiB (never
// a part of it: what is refused could follow the part).
[[nodiscard]] std::optional<std::string> ReadProcessFile(pid_t pid, const char* name);

// What /proc/<pid>/fd/<fd> links to ("pipe:[123]", a path), or empty when there is none.
[[nodiscard]] std::string DescriptorLink(pid_t pid, int fd);

enum class PipeWrite {
  kWritten,  // `line` is in the pipe
  kNotYet,   // the descriptor is not a new anonymous pipe (yet)
  kFailed,   // it is, but the write failed
};
// Writes `bytes` (less than a pipe's capacity, 64 KiB) into the anonymous pipe at descriptor
// `fd` of `pid`, through /proc, if that descriptor is a pipe other than `before` (its link before
// the loader was typed). Never blocks: a pipe that cannot take it all is kFailed.
[[nodiscard]] PipeWrite WriteIntoNewPipe(pid_t pid, int fd, std::string_view before,
                                         std::string_view bytes);

}  // namespace ptybox::backend
