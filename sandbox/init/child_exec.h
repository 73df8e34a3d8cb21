// The steps of a forked child between fork and exec, each named, and how the child reports the
// one that failed: a {stage, errno} record on a close-on-exec pipe (end of file there means the
// exec happened) and an exit status of its own per stage. The launcher, the host probes,
// ptybox-init and the tests' process runner all fork this way. Everything the child side calls
// is async-signal-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::sandbox {

// What a child (or the parent, for kFork) was doing when it failed.
enum class ChildStage : int {
  kFork = 1,      // the parent: creating the pipes and the child
  kCgroup,        // joining the session's cgroups (writing "0" to each cgroup.procs)
  kProcessGroup,  // setpgid
  kSession,       // setsid
  kTerminal,      // TIOCSCTTY: taking the session's terminal as the controlling one
  kStdio,         // putting descriptors on 0, 1 and 2
  kMountStage,    // entering the staged mount namespace (sandbox/mount_stage.h)
  kDescriptors,   // moving descriptors to their fixed numbers, or keeping them across exec
  kCredentials,   // setgroups, setresgid, setresuid
  kDirectory,     // chdir to the working directory
  kExec,          // execve itself
  kParentDeath,   // dying with the daemon (PR_SET_PDEATHSIG), or finding it dead already
};

inline constexpr ChildStage kChildStages[] = {
    ChildStage::kFork,       ChildStage::kCgroup,      ChildStage::kProcessGroup,
    ChildStage::kSession,    ChildStage::kTerminal,    ChildStage::kStdio,
    ChildStage::kMountStage, ChildStage::kDescriptors, ChildStage::kCredentials,
    ChildStage::kDirectory,  ChildStage::kExec,        ChildStage::kParentDeath,
};

// Exit statuses of ptybox's own helpers that failed: ptybox-init itself, and a forked child
// before its exec (one per stage). All lie in 100-123, never 2, 124-127 or 128+N, the codes
// `ptybox run` documents (docs/ci.md): an internal failure cannot pass for a timeout, a
// refusal, a command that cannot run or is missing, or a signal.
inline constexpr int kHelperExitFirst = 100;
inline constexpr int kHelperExitLast = 123;
// ptybox-init could not set the session up (it said why on its stderr).
inline constexpr int kInitExitSetupFailed = kHelperExitFirst;

[[nodiscard]] constexpr int ChildExitCode(ChildStage stage) {
  return kHelperExitFirst + 1 + static_cast<int>(stage);
}
static_assert(ChildExitCode(ChildStage::kParentDeath) <= kHelperExitLast);

// What the stage does, for messages: "joining the session's cgroup".
[[nodiscard]] std::string_view ChildStageName(ChildStage stage);

struct ChildFailure {
  ChildStage stage = ChildStage::kExec;
  int err = 0;  // the errno of the failed call; 0 when the step explained itself on stderr
  bool operator==(const ChildFailure&) const = default;
};

// The program `name` as an exec by ptybox-init finds it: a name with a slash as it is, else the
// first executable of that name on `env`'s PATH (or /usr/local/bin:/usr/bin:/bin); `name` when
// none is. The daemon copies the same file for `exec bash` (sandbox/launcher.cc).
[[nodiscard]] std::string FindProgramOnPath(const std::string& name,
                                            const std::vector<std::string>& env);

// Whether `fd` (a regular file) starts with the ELF magic: an executable the kernel runs itself.
// A script is not: its interpreter reopens it by the path it was started from, which an
// unreadable copy does not have.
[[nodiscard]] bool IsElfFile(int fd);

// "<what the stage does> failed: <strerror>".
[[nodiscard]] std::string DescribeChildFailure(const ChildFailure& failure);

// The child side, async-signal-safe: writes the record to `report_fd` (when >= 0) and the line
// "ptybox: <stage name> failed (errno N)" to `text_fd` (when >= 0), then exits with
// ChildExitCode(stage).
[[noreturn]] void FailChild(ChildFailure failure, int report_fd, int text_fd = -1);

// The parent side: the record read from the report pipe, or nullopt for end of file (the
// child reached its exec) or anything that is not one whole record.
[[nodiscard]] std::optional<ChildFailure> DecodeChildFailure(std::string_view bytes);

// Reads the report pipe until end of file (blocking: the child is between fork and exec).
[[nodiscard]] std::optional<ChildFailure> AwaitChildExec(int report_fd);

// Default dispositions for every signal and an empty mask: both survive exec, and the child
// of a process that blocks or ignores signals would otherwise start with them so.
void ResetChildSignals();

}  // namespace ptybox::sandbox
