// The start-up sweep of stale session-cgroup directories: a daemon that was SIGKILLed (or
// crashed) never removed its `<own cgroup>/ptybox-<pid>-<random>` directories, nor ended what
// was left in them. At start the daemon removes those of daemons that are gone, in each
// hierarchy it keeps session cgroups in: their remaining processes are killed first
// (cgroup.kill, else pids.max 0 and SIGKILL rounds through pidfds, as close does), then the
// directories are removed leaf-first.
//
// Safety: only entries of the daemon's own cgroup whose names match `ptybox-<digits>-<hex>`
// exactly, never anything outside it, never a live daemon's. A live daemon of this version
// holds an flock on each of its directories (sandbox/cgroup.cc), which works across pid
// namespaces; a directory without the lock is still left alone while its pid is alive and is a
// ptybox process or lives in the cgroup where the directory's owner ran (a daemon of an earlier
// version, an in-process user of SessionCgroup). A tree with processes none of which this
// process can see (another pid namespace's) is left alone too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::sandbox {
namespace cgroups {

// The owner's pid of a directory named `ptybox-<pid>-<hex>`; nullopt for any other name.
std::optional<pid_t> StaleCandidateOwner(std::string_view name);

// What is known about a candidate directory's owner.
struct OwnerFacts {
  bool self = false;                // the owner's pid is this process
  bool locked = false;              // another open file holds the directory's flock (a live owner)
  bool alive = false;               // a process with the owner's pid exists (kill 0: not ESRCH)
  std::optional<std::string> comm;  // its /proc/<pid>/comm, when readable
  bool in_parent = false;           // it is a member of the cgroup the directory is in, or beneath
};
struct Judgement {
  bool stale = false;
  std::string reason;
};
// Stale only when the owner is certainly gone: unlocked and (no such pid, or a process that is
// neither a ptybox program nor in the cgroup its owner ran in: the pid was reused).
Judgement JudgeOwner(pid_t owner, const OwnerFacts& facts, std::string_view own_comm);

// A tree whose cgroup says it is populated while none of its members is visible from here
// belongs to another pid namespace: it is never touched.
inline bool ForeignTree(bool populated, std::size_t visible_members) {
  return populated && visible_members == 0;
}

}  // namespace cgroups

struct SweepReport {
  std::vector<std::filesystem::path> removed;  // stale directories removed (top level)
  std::vector<std::string> kept;               // directories left, each with the reason
  std::vector<std::string> problems;           // stale ones that could not be removed, and why
};

// Sweeps every hierarchy where this process has a cgroup of its own (v2, v1 pids/memory/cpu);
// nothing when PTYBOX_SESSION_CGROUPS=0. Blocks until each stale tree is empty and removed,
// or a bounded wait ran out (then it is named in `problems`).
SweepReport SweepStaleDirectories();

}  // namespace ptybox::sandbox
