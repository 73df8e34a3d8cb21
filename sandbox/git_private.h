// A session's private git directory (docs/security.md, "Git for agents"): made by the daemon from
// a host repository's `.git` at launch, and copied back into it when a send settles and when the
// session closes. The session never gets a writable view of any host `.git` path: it writes its
// private copy, and the daemon moves only well-formed data back (objects, refs, HEAD, index),
// reading by descriptor without following links and writing the way git does (`x.lock`,
// O_CREAT|O_EXCL|O_NOFOLLOW, fsync, rename), never overwriting an object, and updating a ref only
// when the host's value is still the one the session started from.
//
// Owns nothing long-lived: the caller keeps the descriptors and the GitSnapshot.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ptybox::sandbox {

// Bounds on what is read or copied, per file.
inline constexpr size_t kGitSmallFileMax = 1 << 20;     // HEAD, a ref, ORIG_HEAD, config
inline constexpr size_t kGitPackedRefsMax = 64u << 20;  // packed-refs
inline constexpr size_t kGitIndexMax = 256u << 20;      // index (the host's)
// A session's index, read by each copy-back: parsed, judged and rebuilt, it costs the daemon a
// few times its size while the copy-back runs (a 244 MiB one raised the daemon's peak by 905
// MiB: outside review 7); larger ones are refused, a line saying so, and with the index HEAD and
// the checked-out branch it goes with stay in the session's private copy (a repository of about
// 500,000 files has such an index); its other branches and tags come back.
inline constexpr size_t kGitSessionIndexMax = 64u << 20;
// The paths of an index the copy-back judges, expanded (version 4 compresses each against the
// one before): past this it is refused, as one over kGitSessionIndexMax is.
inline constexpr size_t kIndexPathBytesMax = 16u << 20;
inline constexpr uint64_t kGitObjectFileMax = 4ull << 30;  // a loose object or a pack file
inline constexpr uint64_t kGitPackIndexMax = 512u << 20;   // a pack's .idx, read into memory
inline constexpr size_t kGitMaxRefs = 100'000;             // refs in one repository
// Refs one session makes on the host over its life, and the repository's refs (as the
// copy-back knows them) past which a session makes none: a host past kGitMaxRefs refs is one
// whose launches can no longer read them, and every session there, of any owner, would start
// with a read-only `.git` (outside review 46).
inline constexpr size_t kGitRefsMadePerSession = 10'000;
inline constexpr size_t kGitRefsMadeUntil = kGitMaxRefs / 2;
// Entries the copy-back lists of one directory of the session's private copy (`refs/...`,
// `objects/`, `objects/<xx>`, `objects/pack`), and of its whole `refs/` and loose objects walks:
// every entry counts, refused names, locks, empty directories and links too. Past it the
// directory (or the rest of the walk) is refused with one line: 200,000 junk names had cost the
// daemon 137 MiB and 200,000 log lines at every copy-back (outside review 26).
inline constexpr size_t kGitListedEntriesMax = kGitMaxRefs + 1024;
// Lines one copy-back reports of each kind (GitLines); past it each is counted, not kept.
inline constexpr size_t kGitReportLinesMax = 256;
// Session files a session's copy-backs remember as judged (GitSnapshot::judged_files).
inline constexpr size_t kGitJudgedFilesMax = 65'536;
// Session files a session's copy-backs hold back for an object they name
// (GitSnapshot::objects_awaiting).
inline constexpr size_t kGitAwaitedFilesMax = 4096;
// Bytes of session packs repeating objects the host has that one session may copy back.
inline constexpr uint64_t kGitSharedPackBytesPerSession = 1ull << 30;

// The entries of a `.git` that hold code or configuration (gitrepository-layout(5)): a host git
// run there reads them and may run what they say (core.fsmonitor, core.hooksPath, a hook, a
// commondir or gitdir redirect, a submodule's config, a filter named in info/attributes). In the
// private directory each is a mount point over which the launch binds the host's own entry
// read-only; it is never copied back.
struct GitReadOnlyEntry {
  const char* name;
  bool directory;
};
inline constexpr GitReadOnlyEntry kGitReadOnlyEntries[] = {
    {"config", false},      {"config.worktree", false},
    {"commondir", false},   {"gitdir", false},
    {"hooks", true},        {"info", true},
    {"modules", true},      {"worktrees", true},
    {"branches", true},     {"remotes", true},
    {"description", false},
};

// Directories whose absence on the host stays absent in the session: `git worktree add` and
// `git submodule add` would make metadata there that is never copied back (a linked worktree's
// gitdir, a submodule's git directory), so they fail with "Read-only file system" instead.
inline constexpr const char* kGitCoveredWhenAbsent[] = {"worktrees", "modules"};

// Plain state files copied into the private directory at launch when the host has them (bounded,
// regular files only). Only HEAD and the index come back; the others are the session's own.
// (packed-refs is written from the launch's one reading of the refs, with the loose refs.)
inline constexpr const char* kGitCopiedStateFiles[] = {
    "HEAD",       "ORIG_HEAD",        "FETCH_HEAD",  "MERGE_HEAD", "MERGE_MSG",      "MERGE_MODE",
    "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "shallow",    "COMMIT_EDITMSG",
};

// Linked worktrees (gitrepository-layout(5), `worktrees/<id>`): each existing one the host has gets
// a private directory of its own in the private copy (`.ptybox-worktrees/<id>`, attached at launch
// over `worktrees/<id>` inside the host's read-only `worktrees/`), so that a commit in the
// worktree's checkout writes its HEAD and index there; its back-link, its link to the common
// directory, its lock and its configuration stay the host's, read-only; `worktrees/` itself stays
// read-only (`git worktree add` fails cleanly). HEAD and the index come back like the main ones.
inline constexpr size_t kGitMaxWorktrees = 16;  // the others stay read-only in the session
inline constexpr char kGitPrivateWorktrees[] = ".ptybox-worktrees";
inline constexpr const char* kGitWorktreeReadOnlyFiles[] = {"gitdir", "commondir", "locked",
                                                            "config.worktree"};
inline constexpr const char* kGitWorktreeStateFiles[] = {
    "HEAD",       "ORIG_HEAD",        "FETCH_HEAD",  "MERGE_HEAD", "MERGE_MSG",
    "MERGE_MODE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "AUTO_MERGE", "COMMIT_EDITMSG"};

// What a linked worktree started from (its HEAD and index), and which of
// kGitWorktreeReadOnlyFiles the host has for it (mount points in its private directory).
struct GitWorktreeSnapshot {
  std::string head;
  std::optional<std::string> index;
  std::vector<std::string> read_only_names;
  // Its working tree lies in the session's writable roots (MarkSharedWorktrees): the session
  // works in it, so a commit there may move the branch it has checked out, and its HEAD and
  // index come back. Decided at launch from `gitdir` (the host's `worktrees/<id>/gitdir` then),
  // and undone for good once that file says otherwise (the person moved the worktree, or
  // removed it and added one elsewhere: outside review 43).
  bool shared = false;
  std::string gitdir;
  bool operator==(const GitWorktreeSnapshot&) const = default;
};

// What the session started from: the host's refs (loose over packed), HEAD and the index, as
// read at launch and updated by each copy-back. A ref is written to the host only while the
// host still holds the value recorded here.
struct GitSnapshot {
  std::map<std::string, std::string> refs;  // "refs/heads/main" -> "<hex>" or "ref: refs/..."
  // The person's branches, tags and stash when the session started: a copy-back never deletes
  // one, nor moves a tag (outside reviews 7 and 8: `git tag -f`, `git branch -D`, `git stash
  // clear` reached the host). A branch or the stash may move (rebase, amend, stash push); its
  // host reflog keeps the old tip.
  std::set<std::string> launch_refs;
  // Each such refusal once per value the session holds, not at every copy-back: the value last
  // refused per name (one entry per launch ref: a set of every "name\nvalue" grew by 100 MiB
  // over 24 sends rewriting 20,000 tags, outside review 27).
  std::map<std::string, std::string> kept_refs;
  // Each refusal or conflict line logged so far (at most 1,024; past them a copy-back logs one
  // line counting the rest): a refused HEAD or tag name would otherwise be logged again at
  // every copy-back of the session.
  std::set<std::string> logged;
  std::string head;                  // HEAD's content, trimmed
  std::optional<std::string> index;  // the index's bytes, nullopt when there was none
  // The kGitReadOnlyEntries the host has (of the right type, not a link): each is a mount
  // point in the private directory for the host's own entry, bound read-only.
  std::vector<std::string> read_only_names;
  // The kGitCoveredWhenAbsent directories the host lacks: each is a mount point for an empty
  // read-only directory, so that what git would make there fails cleanly in the session.
  std::vector<std::string> covered_names;
  // The host's linked worktrees given a private directory, by id.
  std::map<std::string, GitWorktreeSnapshot> worktrees;
  // Linked worktrees the launch left read-only because the person's git was at work there (a lock
  // held, an index of another commit's tree) or their index is split: a pooled shell with any is
  // not handed out (outside review 51).
  size_t worktrees_left_read_only = 0;
  // Per reflog ("refs/heads/main"): how much of the session's private log was already appended to
  // the host's (the private logs/ starts empty at launch); the next copy-back reads on from there,
  // in the same file (`file`, as FileKey names it). A log git made anew (the branch deleted and
  // made again, outside review 29; or rewritten, `git reflog expire`) is read on from the `last`
  // line taken when that stands in its first part, from its start when it begins with a branch's
  // making (for the stash: other than the `first` line taken, which a stash drop keeps: outside
  // review 30; a branch made again from the same commit in the same second has the same one),
  // else not at all.
  // Lines are appended only as a continuation of the host's log up to the value the copy-back
  // wrote to its ref (outside reviews 32 and 33): `to` is that value and `until` the session log's
  // size when it was written, past which lines wait for the ref's next move; `gap_to` is the new
  // value of the last line of a run passed over (longer than one read) while the host's log ended
  // at `gap_host`, from which the next lines continue it.
  struct ReflogTaken {
    uint64_t bytes = 0;
    size_t lines = 0;
    std::string file;
    std::string first;  // the file's first line taken: a log without it is not made anew
    std::string last;
    uint64_t until = 0;
    std::string to;
    std::string gap_host;
    std::string gap_to;
  };
  std::map<std::string, ReflogTaken> reflog_taken;
  // Refs whose session logs had lines of a move left by the last copy-back that read them (the
  // 32 lines' cap, 1 MiB per copy-back, a tip check's time, a run passed over): read again at
  // the next, moved or not.
  std::set<std::string> reflog_pending;
  uint64_t reflog_bytes = 0;  // appended to the host's logs over the session
  // Tips (object ids) the copy-back refused for the session's life, with why: a check that
  // timed out, or found a gitlink or a non-commit, is not run again at every copy-back
  // (outside review 10: a slow history held each copy-back its full timeout, per branch). At
  // most kRefusedTipsRemembered (4,096) of them.
  std::map<std::string, std::string> refused_tips;
  size_t tip_checks = 0;              // runs of the host's git checking a tip, over the session
  size_t refs_made = 0;               // refs made on the host, over the session
  std::set<std::string> tips_passed;  // tips checked good in this copy-back
  // Stashes the host's refs/stash held, or its log was given, during the session: refs/stash
  // never moves from a stash of the host's to one (outside review 36); at most 4,096, and once
  // full no stash moves over the host's (outside review 37).
  std::set<std::string> stashes_seen;
  // The repository's object id size (20 sha1, 32 sha256) as its configuration says, read at
  // launch; 0 when the host's git could not tell (then guessed from the ids the refs hold).
  size_t hash_size = 0;
  // The end of this copy-back's time for tip checks (kGitTipChecksPerCopyBack from its start):
  // the tips past it wait for the next copy-back.
  std::chrono::steady_clock::time_point tip_checks_until;
  // The session's object and pack files the copy-back judged already (device, inode and size; not
  // times nor name: a `touch` or a `mv` had the same refused file copied into the host's .git
  // again at every send, outside reviews 27 and 28): refused or indexed once, never read again by
  // a later copy-back. At most kGitJudgedFilesMax: past it the memory starts over.
  std::set<std::string> judged_files;
  // The session's object and pack files held back because git's check found an object they name
  // missing (file key, as judged_files, -> that object's id): looked at again only once the host
  // has it, or a loose object of the same copy-back is it. At most kGitAwaitedFilesMax: past it a
  // file so held is judged instead.
  std::map<std::string, std::string> objects_awaiting;
  // Bytes of session packs that also hold objects the host has (a `git repack -d` after earlier
  // commits came back loose) still allowed this session: each copied such pack repeats objects
  // in the person's store (kGitSharedPackBytesPerSession).
  uint64_t shared_pack_bytes_left = kGitSharedPackBytesPerSession;
};

// Refnames as git's check-ref-format(1) allows them, and under refs/ (at least two components).
[[nodiscard]] bool ValidRefName(std::string_view name);
// A ref's content, trimmed of its final newline: a 40- or 64-digit lowercase hex id, or
// "ref: " and a valid refname.
[[nodiscard]] bool ValidRefValue(std::string_view value);
// A linked worktree's id as git makes it (a directory name: letters, digits, `.`, `_`, `-`, not
// starting with `.`, at most 255 bytes).
[[nodiscard]] bool ValidWorktreeId(std::string_view id);
// A reflog line as git writes it: `<old id> <new id> <name> <<email>> <seconds> <+-hhmm>`, then a
// tab and the message, or nothing; ids of one length (40 or 64), no control character but that
// tab, at most 4096 bytes (without its newline).
[[nodiscard]] bool ValidReflogLine(std::string_view line);
// A loose object's directory ("ab") and file (38 or 62 hex digits) names.
[[nodiscard]] bool ValidLooseObjectDir(std::string_view name);
[[nodiscard]] bool ValidLooseObjectFile(std::string_view name);
// A pack's file name: pack-<40 or 64 hex>.{pack,idx,rev}.
[[nodiscard]] bool ValidPackFile(std::string_view name);
// Whether `index` (a git index file, versions 2 to 4) names only paths the host's git may write
// in a worktree: each entry's path is relative, has no empty, `.` or `..` component, and no
// component git treats as `.git` (any case, trailing dots or spaces, `git~1`); a split index
// (`link` extension, whose entries live in a file never copied back) is refused too. A host
// `git restore .` writes what the index names, so an entry `.git/hooks/pre-commit` would become
// a hook. `hash_size`: 20 (SHA-1) or 32 (SHA-256). False with `why` naming the first fault.
[[nodiscard]] bool SafeIndex(std::string_view index, size_t hash_size, std::string& why);
// The gitlinks (submodule entries, mode 160000) of an index the host's git reads, as git reads it
// (versions 2 to 4, SHA-1 or SHA-256, no path judged). A split index names its shared part
// (`sharedindex.<id>` beside it), whose gitlinks count too. nullopt with `why` when `index` is not
// an index git could read (then the host's git reads no submodule from it either).
struct IndexGitlinks {
  std::vector<std::string> paths;  // relative to the worktree, as the index spells them
  std::string shared_index;        // hex id of the shared part of a split index, or empty
  size_t hash_size = 20;
};
[[nodiscard]] std::optional<IndexGitlinks> GitlinksOfIndex(std::string_view index,
                                                           std::string& why);
// The index the host gets for the session's `index`: SafeIndex's checks, and refused when it adds
// what the index `before` (the host's, as the session started from it) did not hold: a gitlink
// (a submodule entry: the host's `git status` runs git in that directory, in a repository the
// session may have made), an assume-unchanged or a skip-worktree flag (the host's git would stop
// seeing the file). What is kept is the entries alone: every extension (the cache-tree, the
// untracked cache, resolve-undo) is a cache git rebuilds, and a cache-tree naming another tree
// made the person's `git commit` record the session's tree. The checksum is computed again.
// `changed`, when given, gets the entries `before` did not hold byte for byte but gitlinks
// (which name commits of another repository): the objects the host must have, with the types
// their modes need (CopyBackIndex asks the host's git). `unmerged`, when given, says whether an
// entry is at a stage of a conflict (1 to 3). A skip-worktree flag on a path `before` did not
// hold passes while `sparse_checkout` says the host's worktree is a sparse checkout whose git
// clears the flag of a file present (HostSparseCheckout). A backslashed path passes when
// `before` has it.
struct IndexObject {
  std::string path;
  uint32_t mode = 0;
  std::string id;  // hex
};
[[nodiscard]] std::optional<std::string> IndexForHost(
    std::string_view index, const std::optional<std::string>& before, size_t hash_size,
    std::string& why, std::vector<IndexObject>* changed = nullptr, bool* unmerged = nullptr,
    const std::function<bool()>& sparse_checkout = {});
// packed-refs parsed: name -> id (peeled `^` lines and the header skipped); an error names the
// first malformed line.
[[nodiscard]] Result<std::map<std::string, std::string>> ParsePackedRefs(std::string_view text);

// Makes the private git directory in the empty directory `private_fd` from the host's `.git`
// (`host_git_fd`, a directory opened without following links): HEAD, the index and the other
// kGitCopiedStateFiles copied; packed-refs and refs/ (well-formed loose names and values only)
// written from one reading of the refs, loose first as git reads them, which the snapshot holds
// too; an empty
// logs/, objects/ with objects/pack/ and objects/info/alternates naming `objects_inside` (where
// the host's objects appear read-only in the session), and a mount point for each
// kGitReadOnlyEntries entry the host has (config copied into it, so that the directory is a
// working git directory before the binds too). Every item made is chowned to `owner` when set
// (a root daemon's session writes through an idmap of the workspace owner).
struct GitOwner {
  uid_t uid;
  gid_t gid;
};
[[nodiscard]] Result<GitSnapshot> PreparePrivateGit(int host_git_fd, int private_fd,
                                                    std::string_view objects_inside,
                                                    std::optional<GitOwner> owner = std::nullopt);

// Marks each linked worktree of `snapshot` whose working tree (the directory of the path its
// host `worktrees/<id>/gitdir` names) lies lexically within one of `roots`, the session's
// writable roots.
void MarkSharedWorktrees(int host_git_fd, const std::vector<std::filesystem::path>& roots,
                         GitSnapshot& snapshot);

// Whether the host's `.git` still holds what `snapshot` recorded (refs, HEAD, index): a private
// copy made earlier (a pooled shell's) is current only then.
[[nodiscard]] Result<bool> HostStillAt(int host_git_fd, const GitSnapshot& snapshot);

// Lines of one copy-back's report, bounded (kGitReportLinesMax): past the bound each further line
// is only counted, so a session filling its private directory with entries the copy-back refuses
// costs the daemon a bounded report, and its log a summary (outside review 26).
class GitLines {
 public:
  void push_back(std::string line) {
    if (lines_.size() < kGitReportLinesMax) {
      lines_.push_back(std::move(line));
    } else {
      ++dropped_;
    }
  }
  void Append(const GitLines& other) {
    for (const std::string& line : other.lines_) push_back(line);
    dropped_ += other.dropped_;
  }
  // Nothing reported, kept or counted.
  [[nodiscard]] bool empty() const { return lines_.empty() && dropped_ == 0; }
  [[nodiscard]] size_t size() const { return lines_.size(); }  // the lines kept
  [[nodiscard]] size_t dropped() const { return dropped_; }    // the lines counted past them
  [[nodiscard]] const std::string& front() const { return lines_.front(); }
  [[nodiscard]] const std::string& operator[](size_t i) const { return lines_[i]; }
  [[nodiscard]] std::vector<std::string>::const_iterator begin() const { return lines_.begin(); }
  [[nodiscard]] std::vector<std::string>::const_iterator end() const { return lines_.end(); }
  operator const std::vector<std::string>&() const { return lines_; }  // NOLINT: a view

 private:
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
};

// What one copy-back did. `refused` holds one line per entry of the private directory it would
// not copy (a link, a FIFO, a hard-linked file, a malformed name or value, too large); `conflicts`
// one per ref, HEAD or index the host changed since the session started from it (left alone).
struct GitCopyBack {
  size_t objects = 0;  // loose objects and pack files written
  size_t refs = 0;     // refs created, updated or deleted
  bool head = false;
  bool index = false;
  size_t worktree_files = 0;  // linked worktrees' HEADs and indexes written
  size_t reflog_lines = 0;    // lines appended to the host's reflogs
  size_t tip_checks = 0;      // tips checked by a run of the host's git (CheckTip)
  GitLines refused;
  GitLines conflicts;
};

// Copies the session's work from `private_fd` into the host's `.git` (`host_git_fd`): new loose
// objects and packs (never overwriting one), then each ref whose value the session changed
// (created, moved or deleted) when the host's value is still `snapshot`'s, then HEAD and the
// index on the same rule. `snapshot` is updated to what was written. An error only when the host
// directory itself cannot be used; what is refused or in conflict is reported, not fatal.
[[nodiscard]] Result<GitCopyBack> CopyBackPrivateGit(int private_fd, int host_git_fd,
                                                     GitSnapshot& snapshot);

}  // namespace ptybox::sandbox
