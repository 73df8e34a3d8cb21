// The host facts behind the walls of docs/security.md that BuildBwrapArgv cannot know as a pure
// function: which run-time directories exist, which hidden paths (secrets) exist and whether
// each is a directory, and every home directory `~/` stands for. Read at every spawn.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"
#include "sandbox/bwrap_args.h"

namespace ptybox::sandbox {

// /run, and /var/run when it is a directory of its own (usually it is a link to /run; a link
// elsewhere counts as its target).
std::vector<std::filesystem::path> HostRunDirs();

// Every home directory `~/` expands to: $HOME of the daemon and each existing home directory
// of the password database (getpwent), canonical, without duplicates.
std::vector<std::filesystem::path> HomeDirectories();

// This user's ptybox run-time directory, for sockets, audit logs and recordings of its daemons:
// `/run/ptybox` for root; else `$XDG_RUNTIME_DIR/ptybox` when XDG_RUNTIME_DIR is an absolute
// directory owned by this uid, else `/run/user/<uid>/ptybox` when `/run/user/<uid>` is one;
// nullopt when there is none. ApplyHostWalls hides it in every confined session (it is usually
// under /run, which is hidden anyway), so no daemon's session sees another daemon's files.
std::optional<std::filesystem::path> PerUserRuntimeDirectory();

// The existing paths among `patterns` ("/abs/path" or "~/rel/path", expanded over `homes`),
// canonical (a link is hidden at its target), without duplicates. A pattern that names
// nothing on this host needs nothing.
// Whether an id that owns no host file (a root daemon's session uid) can search every directory
// above `path`; directories inside `roots` (idmapped to the session) count as reachable.
bool ReachableByStranger(const std::filesystem::path& path,
                         const std::vector<std::filesystem::path>& roots);

std::vector<HiddenPath> CollectHiddenPaths(const std::vector<std::string>& patterns,
                                           const std::vector<std::filesystem::path>& homes);

// The daemon user's own home directories (its $HOME and its password-database entry,
// canonical, not "/"); empty for a root daemon, whose sessions run as ids that own nothing.
std::vector<std::filesystem::path> OwnHomeDirectories();

// An ordinary user's daemon runs its sessions as that user, so every file of the user's home
// would be readable: the home is hidden by directory, never entry by entry, so that what the
// host creates there after a launch is hidden too. kGranted: the home is, or lies inside, a
// granted path (workspace, writable root, start directory) and stays. kVeil: it holds a granted
// path: an empty tmpfs made before the binds, which put the granted paths back into it
// (SandboxSpec::veiled_homes). kHide: it holds none: an empty read-only tmpfs like any hidden
// directory. Pure.
enum class HomeCover { kGranted, kVeil, kHide };
[[nodiscard]] HomeCover CoverOfHome(const std::filesystem::path& home,
                                    const std::vector<std::filesystem::path>& granted);

// The pathname sockets bound in this network namespace, parsed from `table` (the text of
// /proc/net/unix): each absolute path once, in order, at most `limit`. Pure: whether a path
// is still a socket on the host is for the caller to see.
std::vector<std::filesystem::path> UnixSocketPaths(std::string_view table, size_t limit);

// Fills the walls' facts into `spec` (run_dirs, hidden) from the policy; for an ordinary
// user's daemon in a confined mode, its own home except the granted paths too, and in both
// confined modes every pathname socket a host service has bound outside the roots, /run and
// /tmp (docs/security.md, "No host service over UNIX sockets").
void ApplyHostWalls(const policy::ResolvedPolicy& policy, SandboxSpec& spec);

// A root daemon's session (and bwrap, which places the covers) runs as an unprivileged id that
// owns nothing outside its roots: a hidden path or the daemon's socket below a directory it
// cannot search is out of its reach already, and bwrap could not cover it. Drops those.
void DropCoversOutOfReach(SandboxSpec& spec);

}  // namespace ptybox::sandbox
