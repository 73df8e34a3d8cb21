// Foreground facts about one session's terminal, read from the host's /proc: which process
// group is in the foreground, and whether that group is blocked waiting for input from this
// terminal. Works for sandboxed sessions (all pids are host pids). What it cannot tell is
// reported as unknown, never as idle.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ptybox::backend {

// Identity of the session's terminal as its processes see it.
struct TerminalIdentity {
  dev_t slave_dev = 0;       // st_dev of the slave node: the devpts instance it lives in
  dev_t slave_rdev = 0;      // st_rdev of the slave node
  pid_t session_leader = 0;  // host pid of the POSIX session leader; its members' /dev/tty is this
};

enum class TtyWait {
  kNone,    // not waiting on this terminal (running, or blocked on something else)
  kRead,    // read/readv/pread on an fd that refers to this terminal
  kSelect,  // select/pselect6 whose read set includes such an fd
  kPoll,    // poll/ppoll watching such an fd for input
  kEpoll,   // epoll_wait/epoll_pwait/epoll_pwait2 on an epoll set watching such an fd for input
};

// What one look at /proc found about a yes-or-no fact: proved yes, proved no, or not provable
// from what was readable (a vanished task, an unreadable file).
enum class Finding { kUnknown, kYes, kNo };

struct TaskFacts {
  pid_t pid = 0;
  pid_t tid = 0;
  bool running = false;  // runnable (state R), inside no syscall, or it ran while inspected
  TtyWait tty_wait = TtyWait::kNone;
  uint64_t run_ns = 0;  // cumulative on-CPU time (schedstat); changes iff the task ran
  // How often it was put on a CPU (schedstat's third field; where the kernel has no schedstat,
  // its voluntary context switches from `status`): grows whenever it wakes.
  uint64_t switches = 0;
  // The timeout of its wait when it waits on the terminal with one (select, poll, epoll),
  // as the program passed it; nullopt when it waits without a timeout (or for read).
  std::optional<int64_t> wait_timeout_ms;
  // A process of the session outside the foreground group (a tmux server, a pinentry started by
  // a daemon): reported only when it waits on this terminal and the foreground group is asleep
  // elsewhere (see ForegroundFacts::waiting_for_input).
  bool outside_group = false;
};

struct ForegroundFacts {
  std::optional<pid_t> foreground_pgid;  // TIOCGPGRP on the master; nullopt when unknown
  // kYes: every inspected task of the foreground group is asleep and at least one of them waits
  // for input from this terminal, or the whole group is asleep elsewhere and another process of
  // the session (one the walk from the session's root reaches) waits for input from this
  // terminal. kNo: some task of the group runs, or no one waits on this terminal.
  // kUnknown: something needed could not be read (permissions, a vanished task, no group).
  Finding waiting_for_input = Finding::kUnknown;
  // Every task of the foreground group that was inspected, in no particular order. Tasks that
  // could not be read are left out (the answer is then kUnknown), and inspection stops at the
  // first running task, since that alone decides kNo.
  std::vector<TaskFacts> tasks;
  // Bytes written to the terminal that no program has read yet (FIONREAD on the slave; complete
  // lines only in canonical mode); nullopt when unknown. Filled by the terminal provider.
  std::optional<size_t> unread_input;
  // The terminal's line discipline is canonical (ICANON: line by line) rather than raw or
  // cbreak (key by key, as full-screen programs and key-polling loops set it); nullopt when
  // unknown. One tcgetattr on the master.
  std::optional<bool> canonical;
  // The terminal shows a full screen: the alternate screen (a curses dialog, an editor), or the
  // send's output addressed the cursor (top draws on the normal screen); nullopt when unknown.
  // Filled by the readiness driver from the decoder.
  std::optional<bool> alternate_screen;
  // Tasks of processes outside the foreground group that were looked at for a terminal wait
  // (the outside scan runs only when the group is asleep elsewhere); a measure of its cost.
  size_t outside_scanned = 0;
  // Live processes of the session (the walk from its root) that are neither in the foreground
  // group nor ancestors of the shell (the launch chain: bwrap, ptybox-init); nullopt when the
  // walk was incomplete. 0 with the shell's group alone in the foreground: nothing but the
  // shell could read the terminal or fork a reader (the re-exec'd shell's bootstrap,
  // backend/readiness/rebootstrap.h).
  std::optional<size_t> other_processes;
  // The shell and its ancestors the walk met (the launch chain: bwrap, ptybox-init), each a
  // process of one task; nullopt when the walk was incomplete. With `other_processes` 0 and the
  // shell single-threaded, the session's cgroup must count exactly this many tasks: a task the
  // walk could not see (a thread of a process whose leader exited, a process that forked on
  // between two reads of the walk) is counted there (backend/readiness/rebootstrap.h).
  std::optional<size_t> chain_processes;
};

// How one inspected task stands; the group's answer combines them (CombineTaskVerdicts).
enum class TaskVerdict {
  kRunning,          // on a CPU, runnable, outside any syscall, or it ran while inspected
  kWaitsOnTerminal,  // asleep in a call that waits for input from this terminal
  kAsleepElsewhere,  // asleep (or stopped, or a zombie) and not waiting on this terminal
  kUnknown,          // something needed could not be read
};

// The group's answer: kNo if any task runs (exact evidence the group is not blocked); else
// kUnknown if the member list is incomplete, a task is unknown, or there is no task; else kYes
// if some task waits on this terminal; else kNo.
[[nodiscard]] Finding CombineTaskVerdicts(const std::vector<TaskVerdict>& verdicts,
                                          bool members_complete);

// Bytes written to the terminal that no program has read yet, counted through a descriptor of
// its slave: FIONREAD, after a zero-timeout poll. A write to the master reaches the line
// discipline through a kernel work item, not inside write(): until it runs, FIONREAD says 0 for
// input still on its way, and a reader seen waiting would look as if it had consumed it. The
// poll (n_tty_poll) runs that pending work first, so the count includes everything written
// before the call. nullopt when the descriptor cannot be asked.
[[nodiscard]] std::optional<size_t> UnreadTerminalInput(int slave_fd);

// The /proc files of a session's tasks that one look read, kept open for the next look
// (foreground_inspector.cc): a look then reads them without a path walk, an open and a close.
class ProcFileCache;

// Descriptors one session's cache holds at most: the shell's three files (stat, status,
// schedstat), the launch chain's stat, a foreground program's.
inline constexpr size_t kProcFilesPerSession = 8;

// How many descriptors every session's cache may hold together (the daemon sets it from its
// descriptor limit, runtime/daemon.cc); 0 turns the caches off. Default: 1024.
void SetProcFileBudget(size_t descriptors);

class ForegroundInspector final {
 public:
  // `master_fd` stays owned by the caller and must outlive the inspector. `shell_pid` is the host
  // pid of the top-level shell: group members are found among its descendants.
  ForegroundInspector(int master_fd, TerminalIdentity identity, pid_t shell_pid);
  ~ForegroundInspector();
  ForegroundInspector(ForegroundInspector&&) noexcept;
  ForegroundInspector& operator=(ForegroundInspector&&) noexcept;

  // Only the foreground process group (one ioctl, no /proc reads).
  [[nodiscard]] std::optional<pid_t> ForegroundPgid() const;
  // The full inspection: group members, their syscalls, fd identities, wait sets.
  [[nodiscard]] ForegroundFacts Inspect() const;
  // Whether `verified` (the facts of an earlier Inspect that found the group waiting on this
  // terminal) still describe the terminal: the same foreground group, and none of its tasks
  // has been on a CPU since (their schedstat run time is unchanged), so each is still in the
  // very wait it was seen in. One ioctl and one schedstat read per task; false whenever
  // anything differs or cannot be read.
  [[nodiscard]] bool StillAsVerified(const ForegroundFacts& verified) const;

 private:
  int master_fd_;
  TerminalIdentity identity_;
  pid_t shell_pid_;
  std::unique_ptr<ProcFileCache> files_;  // the looks' state behind a const interface
};

}  // namespace ptybox::backend
