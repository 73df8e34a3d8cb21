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
// `--no-pager`...), or the name of a dashed program (`git-commit`). nullopt when there is none.
[[nodiscard]] std::optional<std::string> GitSubcommand(std::string_view cmdline);

// Whether a git command line may move HEAD or its branch, or write the index: its subcommand is
// not one of kGitLeavesHead, nor a listing (`stash list`/`show`, `worktree list`, `branch`
// without -m/-M, `reflog`), nor one of `also_ignored`. A git left waiting on its pager is such a
// listing, and holds nothing (outside review 53).
[[nodiscard]] bool GitMayMoveHead(std::string_view cmdline,
                                  std::span<const std::string_view> also_ignored = {});

// The subcommands that never move HEAD or its branch nor write the index (some refresh its stat
// data under its lock): every other one may, an alias (`git co`, `git ci`) or one not known here
// included, and is waited for. With the readers, the object plumbing another daemon's copy-back
// runs (`index-pack`, `pack-objects`...) and gc's parts.
inline constexpr std::string_view kGitLeavesHead[] = {"archive",
                                                      "blame",
                                                      "cat-file",
                                                      "check-attr",
                                                      "check-ignore",
                                                      "commit-tree",
                                                      "config",
                                                      "count-objects",
                                                      "credential",
                                                      "credential-cache",
                                                      "credential-cache--daemon",
                                                      "credential-store",
                                                      "describe",
                                                      "diff",
                                                      "fetch",
                                                      "for-each-ref",
                                                      "fsck",
                                                      "fsmonitor--daemon",
                                                      "gc",
                                                      "grep",
                                                      "hash-object",
                                                      "help",
                                                      "index-pack",
                                                      "log",
                                                      "ls-files",
                                                      "ls-remote",
                                                      "ls-tree",
                                                      "maintenance",
                                                      "merge-base",
                                                      "mktag",
                                                      "mktree",
                                                      "name-rev",
                                                      "notes",
                                                      "pack-objects",
                                                      "pack-refs",
                                                      "prune",
                                                      "prune-packed",
                                                      "push",
                                                      "remote",
                                                      "repack",
                                                      "rev-list",
                                                      "rev-parse",
                                                      "send-pack",
                                                      "shortlog",
                                                      "show",
                                                      "show-ref",
                                                      "status",
                                                      "tag",
                                                      "unpack-objects",
                                                      "upload-pack",
                                                      "var",
                                                      "verify-pack",
                                                      "version",
                                                      "whatchanged"};

// Whether a git process of the person's that may move HEAD (GitMayMoveHead) runs in the worktree
// `top`: its working directory `top` or beneath it (git changes into the worktree for these, `-C`
// or not). A git is told by the program it runs (/proc/<pid>/exe named `git` or `git-*`), whatever
// name it was started by (a link `g`, a dashed `git-commit`: outside review 53). Not counted: this
// process's own runs of git (RunCaptured's, beneath a keeper with no exit signal), processes of
// another pid namespace (a session's), of another user than the owner of `top`, and those whose
// working directory or command line this process may not read; a person the daemon cannot see
// is not waited for. One pass over /proc.
[[nodiscard]] bool PersonsGitRunsIn(const std::filesystem::path& top,
                                    std::span<const std::string_view> also_ignored = {});

// The same, in any of the worktrees `tops` (one repository's), each counted for its own owner.
// One pass over /proc.
[[nodiscard]] bool PersonsGitRunsInAny(std::span<const std::filesystem::path> tops,
                                       std::span<const std::string_view> also_ignored = {});

// The subcommands that may move HEAD's branch or write the index, and no other branch nor HEAD
// to another one (a `git stash branch`, a `git pull --rebase` run another git for that, seen on
// its own). Every other subcommand that may move HEAD (`switch`, `checkout`, `rebase`,
// `worktree`, `bisect`, `branch -m`, an alias, one not known here) may read a branch's tip and
// then land HEAD on it without reading it again: the copy-back moves no branch of the repository
// while one runs (outside review 55).
inline constexpr std::string_view kGitMovesOnlyHeadsBranch[] = {
    "add",  "am",        "apply", "cherry-pick", "clean",  "commit", "merge", "mv",
    "pull", "read-tree", "reset", "restore",     "revert", "rm",     "stash", "update-index"};

}  // namespace ptybox::sandbox
