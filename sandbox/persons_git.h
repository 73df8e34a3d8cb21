// The person's own git at work in a worktree, seen from the daemon through /proc: what the
// launch of a Git for agents session and the copy-back wait for, where no lock or file of git's
// says so (`git switch` printing between its index and HEAD writes, `git commit` running its
// hooks or editor: outside reviews 50 to 52).
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ptybox::sandbox {

// The subcommand of a git command line (NUL-separated, as /proc/<pid>/cmdline holds it): the
// first argument after git's own options (`-C <dir>`, `-c <name>=<value>`, `--git-dir <dir>`,
// `--no-pager`...). nullopt when there is none.
[[nodiscard]] std::optional<std::string> GitSubcommand(std::string_view cmdline);

// The subcommands that move HEAD or its branch, or write the index and HEAD at two moments.
inline constexpr std::string_view kGitMovesHead[] = {
    "am",     "bisect", "checkout", "cherry-pick", "commit", "merge",  "pull",
    "rebase", "reset",  "restore",  "revert",      "stash",  "switch", "worktree"};
// Those of kGitMovesHead that leave the index and HEAD of two states while they run (a commit
// leaves one: its staged work, HEAD not moved yet).
inline constexpr std::string_view kGitSwitchesHead[] = {
    "am",    "bisect",  "checkout", "cherry-pick", "merge",  "pull",    "rebase",
    "reset", "restore", "revert",   "stash",       "switch", "worktree"};

// Whether a git process of the person's whose subcommand is one of `subcommands` runs in the
// worktree `top`: its working directory `top` or beneath it (git changes into the worktree for
// these, `-C` or not). Not counted: this process's own runs of git (RunCaptured's, beneath a
// keeper with no exit signal), processes of another pid namespace (a session's), and those whose
// working directory or command line this process may not read (another user's, for a daemon
// that is not root); a person the daemon cannot see is not waited for. One pass over /proc.
[[nodiscard]] bool PersonsGitRunsIn(const std::filesystem::path& top,
                                    std::span<const std::string_view> subcommands);

}  // namespace ptybox::sandbox
