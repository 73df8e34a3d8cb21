// What a session hands the host's .git as objects is checked against the objects' names before
// the host keeps it (docs/security.md, "Git for agents"). Git trusts the name under which it finds
// an object and never rehashes on read: a loose object filed under the id of `hello\n` that held
// `EVIL!` was what a person's later `git checkout` of such a file wrote (the outside review's
// fifth finding). So a loose object is inflated and hashed here, and a pack is indexed by the
// host's own `git index-pack`, which computes every object's name from its contents; the index the
// session wrote is never used.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace ptybox::sandbox {

// Largest object a loose object file may inflate to.
inline constexpr uint64_t kGitInflatedObjectMax = 4ull << 30;
// A loose object over kGitRatioFloor bytes that declares more than kGitInflateRatioMax times its
// file's size is refused before it is inflated: a 1 MiB file of zlib'd zeros declaring 1 GiB cost
// seconds of the daemon's time each, and 32 of them held a `terminal_close` for 120 s.
inline constexpr uint64_t kGitRatioFloor = 16u << 20;
inline constexpr uint64_t kGitInflateRatioMax = 256;
// What one copy-back inflates at most; the objects past it wait for the next copy-back.
inline constexpr uint64_t kGitInflateBudget = 1ull << 30;

// Whether the loose object read from `fd` (from offset 0, `size` bytes) is one zlib stream that
// inflates to `<type> <size>\0` (type blob, tree, commit or tag) and exactly that many bytes, with
// nothing after it, and whose SHA-1 (an `id` of 40 hex digits) or SHA-256 (64) is `id`. False
// with `why` naming the fault.
// `budget`: bytes this copy-back may still inflate; an object declaring more is refused with
// `deferred` set (it may come back with a later copy-back), else its size is taken from it.
[[nodiscard]] bool LooseObjectMatchesName(int fd, uint64_t size, std::string_view id,
                                          std::string& why, uint64_t& budget, bool& deferred);

// What a loose object inflates to, handed on as it is read (LooseObjectPack): `Header` once with
// its type ("blob", "tree", "commit", "tag") and size, then `Body` with its bytes in order. A
// false from either ends the read.
class LooseObjectSink {
 public:
  virtual ~LooseObjectSink() = default;
  virtual bool Header(std::string_view type, uint64_t size) = 0;
  virtual bool Body(std::string_view bytes) = 0;
};

// A pack of loose objects written by this process into `fd` (its own file, empty), each object
// whole (no deltas), so that the host's git holds them to its fsck rules (IndexPack) before any is
// copied back: git's own checks of an object's form, not a list of ours (outside review 38).
class LooseObjectPack {
 public:
  LooseObjectPack(int fd, size_t hash_size);
  // Appends the loose object read from `loose_fd` (from offset 0, `size` bytes), after the
  // checks of LooseObjectMatchesName (`id`, `why`, `budget`, `deferred` as there); false and
  // nothing appended when it fails them.
  bool Append(int loose_fd, uint64_t size, std::string_view id, std::string& why, uint64_t& budget,
              bool& deferred);
  // Writes the header (the count) and the trailing checksum; the pack is then whole.
  [[nodiscard]] Result<void> Finish();
  [[nodiscard]] size_t objects() const { return count_; }

 private:
  int fd_;
  size_t hash_size_;
  uint64_t end_;  // where the next entry goes
  uint32_t count_ = 0;
  bool failed_ = false;  // a refused entry could not be cut off again
};

// Whether the loose object read from `fd` (`size` bytes, filed under `id` and checked against it
// as LooseObjectMatchesName does, within `budget`) names the object `target` (hex): as a
// commit's tree or parent, a tag's object, or a tree's entry. False when it does not, or cannot
// be read.
[[nodiscard]] bool LooseObjectLinksTo(int fd, uint64_t size, std::string_view id,
                                      std::string_view target, uint64_t& budget);

// The raw SHA-1 (`hash_size` 20) or SHA-256 (32) digest of `data`.
[[nodiscard]] std::string GitHashBytes(std::string_view data, size_t hash_size);

// Whether a commit `tip` the session made (its objects already in the host's .git, opened as
// `host_git_fd`) adds a gitlink (a submodule entry) that the host's history does not have: the
// host's git is asked for the commits reachable from `tip` and from none of the host's refs, each
// against each of its parents (`git log --raw -m --root`). A gitlink reaches the person's index
// at their next checkout, and their `git status` then runs git in that directory, in a repository
// the session may have made there. The first such "path (in commit X)", or nullopt. An error
// when `tip` is not a commit (through annotated tags): a branch or tag naming a tree or a blob
// (a tree holding a gitlink passed: `git log <tree>` lists nothing).
// `timed_out` is set when the host's git ran past `timeout` (the error then says so).
[[nodiscard]] Result<std::optional<std::string>> CommitAddsGitlink(
    int host_git_fd, std::string_view tip, std::chrono::milliseconds timeout, bool& timed_out);

// The objects reachable from `tip` and from none of the host's refs (`git rev-list --objects
// <tip> --not --all` of the host's .git): what a ref to `tip` makes reachable there, tip
// included. An error when the host's git cannot list them (an object missing), or when they are
// more than kGitObjectsNewAtTipMax; `timed_out` set when it ran past `timeout`.
inline constexpr size_t kGitObjectsNewAtTipMax = 100'000;
[[nodiscard]] Result<std::vector<std::string>> ObjectsNoHostRefReaches(
    int host_git_fd, std::string_view tip, std::chrono::milliseconds timeout, bool& timed_out);

// The size of the host repository's object ids, from its own configuration (`git rev-parse
// --show-object-format`): 20 (sha1) or 32 (sha256). An empty repository has no id to tell by.
[[nodiscard]] Result<size_t> HostHashSize(int host_git_fd);
// Whether the host's worktree whose git directory is `dir` beneath the .git `host_git_fd` ("" the
// main one, "worktrees/<id>/" a linked one) is a sparse checkout (core.sparseCheckout) whose git
// clears the skip-worktree flag of a file present in the worktree (git 2.36 and later, unless
// sparse.expectFilesOutsideOfPatterns is set). False when the host's git cannot say.
[[nodiscard]] bool HostSparseCheckout(int host_git_fd, const std::string& dir);

// The type git gives the object `id` of the host's .git (`git cat-file -t`): "commit", "tag",
// "tree", "blob"; an error when the host's git cannot tell.
[[nodiscard]] Result<std::string> HostObjectType(int host_git_fd, std::string_view id);

// The id (hex) of the tree a commit of the host's names (`git rev-parse <commit>^{tree}`).
[[nodiscard]] Result<std::string> HostTreeOf(int host_git_fd, std::string_view commit);

// Whether `tree` (hex) is the tree of the commit a branch, tag or remote branch of the host's
// names, where a `git switch` or `checkout` goes (`git for-each-ref`, through an annotated tag
// too). One run of git; an error when it fails.
[[nodiscard]] Result<bool> HostRefHasTree(int host_git_fd, std::string_view tree);

// The types of the host's objects `ids` in one run of `git cat-file --batch-check`: id ->
// "commit", "tag", "tree", "blob", or "missing" (an id git does not print is not there either).
[[nodiscard]] Result<std::map<std::string, std::string>> HostObjectTypes(
    int host_git_fd, const std::vector<std::string>& ids);

// A pack as the host's git indexed it.
struct IndexedPack {
  std::string name;  // the pack's name (hex), as git names its files: pack-<name>.pack
  std::string idx;   // the index git wrote (version 2), read into memory
};

// Runs the host's `git index-pack --strict` on `pack` (a file only this process can write)
// in the host's repository (`host_git_fd`, its .git: the person's configuration, no system or
// global one, an empty environment), and reads the index it wrote beside it. `hash_size` 20
// (SHA-1) or 32 (SHA-256). An error says why git refused the pack, in git's words (a thin pack,
// a corrupt one, an object fsck refuses: `error: object <id>: <check>: ...`, an object named
// that neither the pack nor the repository holds: `did not receive expected object <id>`, or
// holds as another type: `object <id>: expected type ...`, no git on the host).
[[nodiscard]] Result<IndexedPack> IndexPack(const std::filesystem::path& pack, size_t hash_size,
                                            int host_git_fd);

}  // namespace ptybox::sandbox
