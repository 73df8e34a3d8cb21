// The private git directory and its copy-back (git_private.h). Every open is openat2 beneath a
// directory descriptor with no symbolic link in any component and no other mount; every file read
// is a regular file checked by fstat on the descriptor that is read; every file written is made
// O_CREAT|O_EXCL|O_NOFOLLOW as `<name>.lock` beside its destination and renamed into place.
#include "sandbox/git_private.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <span>
#include <thread>
#include <tuple>
#include <unordered_set>

#include "common/log.h"
#include "common/propagate.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "sandbox/git_objects.h"
#include "sandbox/git_paths.h"
#include "sandbox/git_work_dir.h"
#include "sandbox/path_open.h"
#include "sandbox/persons_git.h"

namespace ptybox::sandbox {
namespace {

constexpr uint64_t kBeneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

bool IsObjectId(std::string_view s) { return (s.size() == 40 || s.size() == 64) && IsHex(s); }

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

Error Errno(std::string_view call, std::string_view where, int err = errno) {
  return Error::FromErrno(ErrorKind::kInternal, call, where, err);
}

// A directory beneath `dir`, no links; nullopt when absent.
Result<std::optional<UniqueFd>> OpenDir(int dir, const std::string& relative) {
  const int fd =
      OpenAt2(dir, relative.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kBeneath);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<UniqueFd>();
    return std::unexpected(Errno("openat2", relative));
  }
  return std::optional<UniqueFd>(UniqueFd(fd));
}

// A regular file beneath `dir` opened for reading, no links, never blocking on a FIFO; nullopt
// when absent. `single_link`: a hard-linked file (st_nlink > 1) is refused, as is anything not a
// regular file or larger than `max`.
struct OpenedFile {
  UniqueFd fd;
  uint64_t size = 0;
};
Result<std::optional<OpenedFile>> OpenRegular(int dir, const std::string& relative, uint64_t max,
                                              bool single_link) {
  const int fd = OpenAt2(dir, relative.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, kBeneath);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<OpenedFile>();
    if (errno == ELOOP || errno == EXDEV) {
      return Fail(ErrorKind::kPolicyDenied,
                  relative + " is or passes through a symbolic link or another mount", relative);
    }
    return std::unexpected(Errno("openat2", relative));
  }
  OpenedFile file{UniqueFd(fd), 0};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::unexpected(Errno("fstat", relative));
  if (!S_ISREG(st.st_mode)) {
    return Fail(ErrorKind::kPolicyDenied, relative + " is not a regular file", relative);
  }
  if (single_link && st.st_nlink != 1) {
    return Fail(ErrorKind::kPolicyDenied, relative + " has more than one hard link", relative);
  }
  if (static_cast<uint64_t>(st.st_size) > max) {
    return Fail(ErrorKind::kPolicyDenied,
                relative + " is larger than " + std::to_string(max) + " bytes", relative);
  }
  file.size = static_cast<uint64_t>(st.st_size);
  return std::optional<OpenedFile>(std::move(file));
}

Result<std::string> ReadAll(int fd, uint64_t max, const std::string& what) {
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Errno("read", what));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
    if (out.size() > max) {
      return Fail(ErrorKind::kPolicyDenied, what + " grew past " + std::to_string(max) + " bytes",
                  what);
    }
  }
  return out;
}

Result<std::optional<std::string>> ReadFile(int dir, const std::string& relative, uint64_t max,
                                            bool single_link) {
  Result<std::optional<OpenedFile>> file = OpenRegular(dir, relative, max, single_link);
  if (!file) return Propagate(file);
  if (!*file) return std::optional<std::string>();
  Result<std::string> text = ReadAll((*file)->fd.Get(), max, relative);
  if (!text) return Propagate(text);
  return std::optional<std::string>(std::move(*text));
}

Result<void> WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Errno("write", what));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Result<void> Chown(int fd, const std::optional<GitOwner>& owner, const std::string& what) {
  if (!owner) return {};
  if (::fchown(fd, owner->uid, owner->gid) != 0) return std::unexpected(Errno("fchown", what));
  return {};
}

// Makes directory `name` in `dir` (fine when it is already a directory) and opens it.
Result<UniqueFd> MakeDir(int dir, const std::string& name, mode_t mode,
                         const std::optional<GitOwner>& owner) {
  const bool made = ::mkdirat(dir, name.c_str(), mode) == 0;
  if (!made && errno != EEXIST) return std::unexpected(Errno("mkdirat", name));
  Result<std::optional<UniqueFd>> opened = OpenDir(dir, name);
  if (!opened) return Propagate(opened);
  if (!*opened) return std::unexpected(Errno("openat2", name, ENOENT));
  if (made) {
    Result<void> chowned = Chown((*opened)->Get(), owner, name);
    if (!chowned) return Propagate(chowned);
  }
  return std::move(**opened);
}

// Up to `limit` bytes from `from` (at its offset) to `to`.
Result<void> CopyBytes(int from, int to, uint64_t limit, const std::string& from_what,
                       const std::string& to_what) {
  char buffer[1 << 16];
  for (uint64_t left = limit; left != 0;) {
    const ssize_t n =
        ::read(from, buffer, static_cast<size_t>(std::min<uint64_t>(sizeof buffer, left)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Errno("read", from_what));
    if (n == 0) break;
    left -= static_cast<uint64_t>(n);
    Result<void> wrote = WriteAll(to, std::string_view(buffer, static_cast<size_t>(n)), to_what);
    if (!wrote) return wrote;
  }
  return {};
}

// A file the session made sparse: it costs the session nothing and the host every byte (a 1 GiB
// hole became 1 GiB written into the host's .git per file). Git never writes sparse objects or
// packs. Small files may report no blocks on a filesystem that stores them inline: only past
// 1 MiB.
bool Sparse(const struct stat& st) {
  return st.st_size > (1 << 20) &&
         static_cast<uint64_t>(st.st_blocks) * 512 < static_cast<uint64_t>(st.st_size) / 2;
}

// A session file as the copy-back judged it: its device, inode and birth time (statx), which no
// `touch`, `mv` or append of the session's changes (each had a refused file copied or inflated
// again at every send: outside reviews 27 to 29), while a file made anew on a reused inode is
// another. Git never rewrites an object, pack or log in place; a file the session changes in
// place stays judged as it was. Without a birth time (a filesystem that keeps none), device and
// inode. `name` empty: `dir` is the file itself. Empty when it cannot be asked.
std::string FileKey(int dir, const char* name) {
  struct statx stx {};
  const int flags = AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  if (::statx(dir, name, flags, STATX_INO | STATX_BTIME, &stx) != 0) return {};
  std::string key = std::to_string(stx.stx_dev_major) + "." + std::to_string(stx.stx_dev_minor) +
                    ":" + std::to_string(stx.stx_ino);
  if ((stx.stx_mask & STATX_BTIME) != 0) {
    key += ":" + std::to_string(stx.stx_btime.tv_sec) + "." + std::to_string(stx.stx_btime.tv_nsec);
  }
  return key;
}

// Remembers `key` as judged (GitSnapshot::judged_files, at most kGitJudgedFilesMax); false when
// it was already.
bool Judge(std::set<std::string>& judged, const std::string& key) {
  if (key.empty()) return true;  // unknown: judged again next time, as a new file is
  if (judged.size() >= kGitJudgedFilesMax && !judged.contains(key)) judged.clear();
  return judged.insert(key).second;
}

// Whether `name` in `dir` (not followed) is the file `st` describes.
bool SameFileAt(int dir, const std::string& name, const struct stat& st) {
  struct stat now {};
  return ::fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
         now.st_ino == st.st_ino;
}

// What a file is written from: a descriptor to copy from, or the data itself.
struct WriteSource {
  int fd = -1;
  std::string_view data;
  // With `fd`: at most this many bytes are copied (the size fstat saw when the file was checked:
  // a file the session goes on appending to would otherwise keep the copy going without end).
  uint64_t limit = UINT64_MAX;
};
// Writes `source` into `out`, the `<name>.lock` of `dir` the caller made (O_EXCL, owned as
// the file will be), and renames it over `name` (`replace`) or links it there only when `name`
// does not exist yet; the lock is gone afterwards, whatever happened. `still`, when given, is
// asked last, while the lock is held: false leaves everything as it was.
// `durable`: fsynced before the rename (the host's .git); a private copy made at launch is not
// (it is gone with the session, and ten fsyncs per repository were most of a launch's cost).
Result<bool> CommitLock(int dir, const std::string& name, UniqueFd out, const WriteSource& source,
                        bool replace, bool durable, const std::function<Result<bool>()>& still) {
  const std::string lock = name + ".lock";
  // `out` stays open to the end, so that its inode is never another file's: the lock is renamed
  // or removed only while it is still the file written here. One a person removed as stale (git
  // advises it when a lock stays) and their git then made again is theirs.
  struct stat made {};
  const bool known = ::fstat(out.Get(), &made) == 0;
  auto ours = [&] { return known && SameFileAt(dir, lock, made); };
  auto remove = [&] {
    if (ours()) ::unlinkat(dir, lock.c_str(), 0);
  };
  auto fail = [&](Error error) -> Result<bool> {
    remove();
    return std::unexpected(std::move(error));
  };
  if (source.fd >= 0) {
    if (Result<void> copied = CopyBytes(source.fd, out.Get(), source.limit, name, lock); !copied) {
      return fail(copied.error());
    }
  } else if (Result<void> wrote = WriteAll(out.Get(), source.data, lock); !wrote) {
    return fail(wrote.error());
  }
  if (durable && ::fsync(out.Get()) != 0) return fail(Errno("fsync", lock));
  // Compare-and-swap as git does it: the expected value is checked while the lock is held, so
  // a person's git that committed before cannot be overwritten and one after waits for us.
  if (still) {
    Result<bool> same = still();
    if (!same) return fail(same.error());
    if (!*same) {
      remove();
      return false;
    }
  }
  if (!ours()) {
    return std::unexpected(Error(
        ErrorKind::kInternal,
        lock + " was removed meanwhile (or is another process's now); " + name + " left as it is",
        lock));
  }
  if (replace) {
    if (::renameat(dir, lock.c_str(), dir, name.c_str()) != 0) return fail(Errno("renameat", name));
    return true;
  }
  if (::renameat2(dir, lock.c_str(), dir, name.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    remove();
    if (err == EEXIST) return false;  // the host has it already: never overwritten
    return std::unexpected(Errno("renameat2 RENAME_NOREPLACE", name, err));
  }
  return true;
}

// The way git writes a file: `<name>.lock` made exclusively beside it, then CommitLock.
Result<bool> WriteLikeGit(int dir, const std::string& name, const WriteSource& source, mode_t mode,
                          bool replace, const std::optional<GitOwner>& owner = {},
                          bool durable = true, const std::function<Result<bool>()>& still = {}) {
  const std::string lock = name + ".lock";
  const int fd =
      ::openat(dir, lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return std::unexpected(Errno("openat O_EXCL", lock));
  UniqueFd out(fd);
  if (Result<void> chowned = Chown(out.Get(), owner, lock); !chowned) {
    ::unlinkat(dir, lock.c_str(), 0);
    return std::unexpected(chowned.error());
  }
  return CommitLock(dir, name, std::move(out), source, replace, durable, still);
}

// The directory entries of `dir` with their types read without following links.
struct DirEntry {
  std::string name;
  mode_t type = 0;
  nlink_t links = 0;
};
// At most `max` entries: past it an error, or, when `too_many` is given, nothing and *too_many set
// (the session's own directories: kGitListedEntriesMax).
Result<std::vector<DirEntry>> List(int dir, const std::string& what,
                                   size_t max = std::numeric_limits<size_t>::max(),
                                   bool* too_many = nullptr) {
  const int copy = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return std::unexpected(Errno("openat", what));
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    ::close(copy);
    return std::unexpected(Errno("fdopendir", what));
  }
  std::vector<DirEntry> entries;
  while (struct dirent* e = ::readdir(stream)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (entries.size() == max) {
      ::closedir(stream);
      if (too_many == nullptr) {
        return Fail(ErrorKind::kInternal, what + ": more than " + std::to_string(max) + " entries");
      }
      *too_many = true;
      return std::vector<DirEntry>();
    }
    struct stat st {};
    if (::fstatat(::dirfd(stream), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    entries.push_back({name, static_cast<mode_t>(st.st_mode & S_IFMT), st.st_nlink});
  }
  ::closedir(stream);
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return entries;
}

std::string Describe(mode_t type) {
  switch (type) {
    case S_IFLNK:
      return "a symbolic link";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
    case S_IFBLK:
      return "a device";
    case S_IFDIR:
      return "a directory";
    default:
      return "not a regular file";
  }
}

// Loose refs beneath refs/ of `git_fd` (relative names "refs/..."), each well-formed; what is not
// is reported in `refused` (when given: the session's copy, whose walk also lists at most
// kGitListedEntriesMax entries in all) and skipped. `single_link` as OpenRegular.
// A host repository past kGitMaxRefs refs, packed and loose together: read whole or not at all
// (a reading cut short had left out a loose `main` beside 100,000 packed tags, and the session's
// git saw no main).
std::unexpected<Error> TooManyRefs() {
  return Fail(ErrorKind::kPolicyDenied,
              "the repository holds more than " + std::to_string(kGitMaxRefs) +
                  " refs, packed and loose; delete some with git on the host",
              "refs");
}

Result<void> ReadLooseRefs(int git_fd, std::map<std::string, std::string>& refs, GitLines* refused,
                           bool single_link) {
  size_t listed = 0;  // entries of every directory the walk listed (the session's only)
  bool cut = false;   // the walk stopped at kGitListedEntriesMax
  std::function<Result<void>(int, const std::string&, int)> walk =
      [&](int dir, const std::string& prefix, int depth) -> Result<void> {
    if (depth > 64) {
      if (refused) refused->push_back(prefix + ": refs nested deeper than 64 levels");
      return {};
    }
    bool too_many = false;
    Result<std::vector<DirEntry>> entries =
        refused ? List(dir, prefix, kGitListedEntriesMax - listed, &too_many) : List(dir, prefix);
    if (!entries) return Propagate(entries);
    listed += entries->size();
    if (too_many) {
      cut = true;
      refused->push_back(prefix + ": the session's refs/ lists more than " +
                         std::to_string(kGitListedEntriesMax) + " entries; no more are read");
      return {};
    }
    for (const DirEntry& e : *entries) {
      if (cut) return {};
      const std::string name = prefix + "/" + e.name;
      if (refs.size() >= kGitMaxRefs) {
        if (refused == nullptr) return TooManyRefs();
        refused->push_back(name + ": more than " + std::to_string(kGitMaxRefs) + " refs");
        return {};
      }
      if (e.type == S_IFDIR) {
        Result<std::optional<UniqueFd>> sub = OpenDir(dir, e.name);
        if (!sub) return Propagate(sub);
        if (!*sub) continue;
        Result<void> walked = walk((*sub)->Get(), name, depth + 1);
        if (!walked) return walked;
        continue;
      }
      if (e.type != S_IFREG || (single_link && e.links != 1)) {
        if (refused) {
          refused->push_back(
              name + ": " +
              (e.type == S_IFREG ? std::string("a hard-linked file") : Describe(e.type)));
        }
        continue;
      }
      if (e.name.ends_with(".lock")) continue;  // a ref update in progress, git's own
      if (!ValidRefName(name)) {
        if (refused) refused->push_back(name + ": not a valid refname");
        continue;
      }
      Result<std::optional<std::string>> text = ReadFile(dir, e.name, 4096, single_link);
      if (!text) {
        if (refused) refused->push_back(name + ": " + text.error().message);
        continue;
      }
      if (!*text) continue;
      const std::string value = Trim(**text);
      // Only a remote's HEAD (refs/remotes/<name>/HEAD, as git clone writes it) may name
      // another ref: a symbolic refs/stash naming main made the person's next `git stash`
      // delete main and its reflog (outside review 7).
      const bool may_be_symbolic = name.starts_with("refs/remotes/") && name.ends_with("/HEAD");
      if (!ValidRefValue(value) || (!may_be_symbolic && !IsObjectId(value))) {
        if (refused) {
          refused->push_back(name + (may_be_symbolic
                                         ? ": not a hex id or a `ref: refs/...` line"
                                         : ": not a hex id (only a remote's HEAD names a ref)"));
        }
        continue;
      }
      refs[name] = value;
    }
    return {};
  };
  Result<std::optional<UniqueFd>> top = OpenDir(git_fd, "refs");
  if (!top) return Propagate(top);
  if (!*top) return {};
  return walk((*top)->Get(), "refs", 0);
}

// One reading of a git directory's refs, taken as git's own readers take it: every loose ref
// first, then packed-refs, a loose ref over a packed one. Read the other way round, a `git
// pack-refs` between the two (its new packed-refs renamed in, then the loose files removed) showed
// a ref's older packed value: a launch's snapshot and the session's copy of the refs disagreed,
// and the next copy-back moved the person's branch back (outside review 47).
struct RefsReading {
  std::map<std::string, std::string> refs;   // packed, with the loose ones over them
  std::map<std::string, std::string> loose;  // the loose ones taken
  std::optional<std::string> packed;         // packed-refs as read and parsed (none: no file)
};

Result<RefsReading> ReadRefsAsGitDoes(int git_fd, GitLines* refused, bool single_link) {
  RefsReading reading;
  std::map<std::string, std::string> loose;
  Result<void> walked = ReadLooseRefs(git_fd, loose, refused, single_link);
  if (!walked) return Propagate(walked);
  Result<std::optional<std::string>> packed =
      ReadFile(git_fd, "packed-refs", kGitPackedRefsMax, single_link);
  if (!packed) {
    if (refused == nullptr) return Propagate(packed);
    refused->push_back("packed-refs: " + packed.error().message);
  } else if (*packed) {
    Result<std::map<std::string, std::string>> parsed = ParsePackedRefs(**packed);
    if (!parsed) {
      if (refused == nullptr) return Propagate(parsed);
      refused->push_back("packed-refs: " + parsed.error().message);
    } else {
      reading.refs = std::move(*parsed);
      reading.packed = std::move(**packed);
    }
  }
  for (auto& [name, value] : loose) {
    if (reading.refs.size() >= kGitMaxRefs && !reading.refs.contains(name)) {
      if (refused == nullptr) return TooManyRefs();
      refused->push_back(name + ": more than " + std::to_string(kGitMaxRefs) + " refs");
      break;
    }
    reading.refs[name] = value;
    reading.loose.emplace(name, std::move(value));
  }
  return reading;
}

// The refs of a git directory: packed-refs, with loose refs over them (read first).
Result<std::map<std::string, std::string>> ReadRefs(int git_fd, GitLines* refused,
                                                    bool single_link) {
  Result<RefsReading> reading = ReadRefsAsGitDoes(git_fd, refused, single_link);
  if (!reading) return Propagate(reading);
  return std::move(reading->refs);
}

// One version of a file git replaces by a rename (packed-refs, an index): its device, inode, size
// and times.
std::string VersionKey(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

// The host's packed-refs as one copy-back parsed it (PackedRefsScope), read and parsed again only
// when the file is another: git replaces it by a rename, so its device, inode, size and times name
// one version. Each ref a copy-back wrote read and parsed the whole file twice (each deletion
// three times): 3,000 new branches beside 4,000 packed tags read 1.5 GB (outside review 27).
struct PackedRefsMemo {
  std::string key;  // the version parsed; empty: none
  std::map<std::string, std::string> refs;
  UniqueFd held;  // that version, open: its inode is not reused for another while the memo lives
};
thread_local PackedRefsMemo* packed_memo = nullptr;

class PackedRefsScope {
 public:
  PackedRefsScope() : outer_(packed_memo) { packed_memo = &memo_; }
  ~PackedRefsScope() { packed_memo = outer_; }
  PackedRefsScope(const PackedRefsScope&) = delete;
  PackedRefsScope& operator=(const PackedRefsScope&) = delete;

 private:
  PackedRefsMemo memo_;
  PackedRefsMemo* outer_;
};

// The host's packed refs now (empty when it has no packed-refs), through the copy-back's memo.
Result<const std::map<std::string, std::string>*> HostPackedRefs(int host_git_fd,
                                                                 PackedRefsMemo& local) {
  PackedRefsMemo& memo = packed_memo != nullptr ? *packed_memo : local;
  Result<std::optional<OpenedFile>> file =
      OpenRegular(host_git_fd, "packed-refs", kGitPackedRefsMax, false);
  if (!file) return Propagate(file);
  if (!*file) {
    memo.key.clear();
    memo.refs.clear();
    return &memo.refs;
  }
  struct stat st {};
  if (::fstat((*file)->fd.Get(), &st) != 0) return std::unexpected(Errno("fstat", "packed-refs"));
  const std::string key = VersionKey(st);
  if (memo.key == key) return &memo.refs;
  memo.key.clear();
  Result<std::string> text = ReadAll((*file)->fd.Get(), kGitPackedRefsMax, "packed-refs");
  if (!text) return Propagate(text);
  Result<std::map<std::string, std::string>> parsed = ParsePackedRefs(*text);
  if (!parsed) return Propagate(parsed);
  memo.refs = std::move(*parsed);
  memo.key = key;
  memo.held = std::move((*file)->fd);
  return &memo.refs;
}

// The host's current value of one ref (loose over packed), nullopt when it has none.
Result<std::optional<std::string>> HostRef(int host_git_fd, const std::string& name) {
  Result<std::optional<std::string>> loose = ReadFile(host_git_fd, name, 4096, false);
  if (!loose && loose.error().sys_errno != ENOTDIR) return Propagate(loose);
  if (loose && *loose) return std::optional<std::string>(Trim(**loose));
  PackedRefsMemo local;
  Result<const std::map<std::string, std::string>*> packed = HostPackedRefs(host_git_fd, local);
  if (!packed) return Propagate(packed);
  auto it = (*packed)->find(name);
  if (it == (*packed)->end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

// Opens (making when `make`) the directories of `relative`'s parent beneath `dir`.
Result<std::optional<UniqueFd>> ParentDir(int dir, const std::string& relative, bool make,
                                          std::string& leaf, const std::optional<GitOwner>& owner) {
  const size_t slash = relative.rfind('/');
  leaf = slash == std::string::npos ? relative : relative.substr(slash + 1);
  UniqueFd current(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!current) return std::unexpected(Errno("openat", "."));
  if (slash == std::string::npos) return std::optional<UniqueFd>(std::move(current));
  size_t start = 0;
  const std::string parent = relative.substr(0, slash);
  while (start <= parent.size()) {
    size_t end = parent.find('/', start);
    if (end == std::string::npos) end = parent.size();
    const std::string part = parent.substr(start, end - start);
    if (make) {
      Result<UniqueFd> next = MakeDir(current.Get(), part, 0755, owner);
      if (!next) return Propagate(next);
      current = std::move(*next);
    } else {
      Result<std::optional<UniqueFd>> next = OpenDir(current.Get(), part);
      if (!next) return Propagate(next);
      if (!*next) return std::optional<UniqueFd>();
      current = std::move(**next);
    }
    start = end + 1;
  }
  return std::optional<UniqueFd>(std::move(current));
}

// packed-refs without `name` (and its peeled line).
std::string DropPacked(std::string_view text, const std::string& name) {
  std::string out;
  bool dropping = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    const bool peeled = line.starts_with("^");
    if (!peeled) dropping = line.size() > 41 && line.substr(line.find(' ') + 1) == name;
    if (!dropping) {
      out.append(line);
      out.push_back('\n');
    }
    start = end + 1;
  }
  return out;
}

// Where the host's object store keeps an object: a loose file, or an entry of one of its packs'
// version-2 indexes (fan-out table, then the sorted ids: a binary search by pread), or the same in
// one of the object directories its `objects/info/alternates` names (a `git clone --shared` or
// `--reference`, whose history is all there: a session's reflog, a branch on an older commit,
// waited for good while they were not searched, outside review 56). The indexes and alternates
// are opened once per store, on the first lookup that needs them.
class HostObjectStore {
 public:
  explicit HostObjectStore(int host_git_fd) : git_(host_git_fd) {}
  // kAlternate: in an object directory of another repository, which this one's gc never prunes.
  enum class Where { kAbsent, kLoose, kPacked, kAlternate };
  struct Place {
    Where where = Where::kAbsent;
    std::string pack;  // kPacked: the index's file name, pack-<hex>.idx
  };
  Result<Place> Find(const std::string& id);
  // Forgets the indexes read: a repack may have replaced them since.
  void Forget() { stores_.reset(); }

 private:
  struct PackIndex {
    std::string name;
    OpenedFile file;
  };
  // One object directory: the host's own (objects/, through its .git), or an alternate.
  struct Store {
    UniqueFd dir;  // invalid for the host's own: its paths are beneath git_
    std::vector<PackIndex> packs;
  };
  Result<void> Open();
  static std::vector<PackIndex> OpenPacks(int pack_dir);
  static const PackIndex* FindPacked(const std::vector<PackIndex>& packs, const unsigned char* want,
                                     size_t raw);
  int git_;
  std::optional<std::vector<Store>> stores_;  // the host's own first
};

// The alternates an object store searches, at most (git follows five levels of alternates of
// alternates; one level is searched here).
constexpr size_t kGitAlternatesMax = 16;

std::vector<HostObjectStore::PackIndex> HostObjectStore::OpenPacks(int pack_dir) {
  std::vector<PackIndex> packs;
  Result<std::vector<DirEntry>> entries = List(pack_dir, "objects/pack");
  if (!entries) return packs;
  for (const DirEntry& e : *entries) {
    if (e.type != S_IFREG || !e.name.ends_with(".idx") || !ValidPackFile(e.name)) continue;
    Result<std::optional<OpenedFile>> idx = OpenRegular(pack_dir, e.name, kGitObjectFileMax, false);
    if (idx && *idx) packs.push_back(PackIndex{e.name, std::move(**idx)});
  }
  return packs;
}

Result<void> HostObjectStore::Open() {
  stores_.emplace();
  Result<std::optional<UniqueFd>> own = OpenDir(git_, "objects/pack");
  if (!own) return Propagate(own);
  stores_->push_back(Store{UniqueFd(), *own ? OpenPacks((*own)->Get()) : std::vector<PackIndex>()});
  // The person's own file (read-only in every session): each line an object directory, absolute
  // or relative to objects/, links followed as git follows them; comments, blank and quoted
  // lines skipped.
  Result<std::optional<std::string>> alternates =
      ReadFile(git_, "objects/info/alternates", 64 * 1024, false);
  if (!alternates || !*alternates) return {};
  Result<std::optional<UniqueFd>> objects = OpenDir(git_, "objects");
  if (!objects || !*objects) return {};
  std::string_view rest(**alternates);
  while (!rest.empty() && stores_->size() <= kGitAlternatesMax) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    const std::string line = Trim(std::string(rest.substr(0, end)));
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (line.empty() || line[0] == '#' || line[0] == '"') continue;
    UniqueFd dir(
        ::openat((*objects)->Get(), line.c_str(), O_RDONLY | O_DIRECTORY | O_NOCTTY | O_CLOEXEC));
    if (!dir) continue;  // gone or unreadable: git warns and goes on
    Result<std::optional<UniqueFd>> packs = OpenDir(dir.Get(), "pack");
    std::vector<PackIndex> indexes =
        packs && *packs ? OpenPacks((*packs)->Get()) : std::vector<PackIndex>();
    stores_->push_back(Store{std::move(dir), std::move(indexes)});
  }
  return {};
}

const HostObjectStore::PackIndex* HostObjectStore::FindPacked(const std::vector<PackIndex>& packs,
                                                              const unsigned char* want,
                                                              size_t raw) {
  auto be32 = [](const unsigned char* b) {
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  };
  for (const PackIndex& pack : packs) {
    const int fd = pack.file.fd.Get();
    unsigned char header[8];
    if (::pread(fd, header, 8, 0) != 8 || std::memcmp(header, "\377tOc\0\0\0\2", 8) != 0) continue;
    unsigned char fan[8];
    const uint32_t first = want[0];
    if (first == 0) {
      if (::pread(fd, fan + 4, 4, 8) != 4) continue;
      std::memset(fan, 0, 4);
    } else if (::pread(fd, fan, 8, 8 + 4 * (first - 1)) != 8) {
      continue;
    }
    uint32_t lo = be32(fan);
    uint32_t hi = be32(fan + 4);
    unsigned char total_bytes[4];
    if (::pread(fd, total_bytes, 4, 8 + 4 * 255) != 4) continue;
    const uint64_t total = be32(total_bytes);
    if (hi > total || lo > hi || 8 + 1024 + total * raw > pack.file.size) continue;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      unsigned char name[32];
      if (::pread(fd, name, raw, static_cast<off_t>(8 + 1024 + uint64_t{mid} * raw)) !=
          static_cast<ssize_t>(raw)) {
        break;
      }
      const int order = std::memcmp(name, want, raw);
      if (order == 0) return &pack;
      if (order < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
  }
  return nullptr;
}

Result<HostObjectStore::Place> HostObjectStore::Find(const std::string& id) {
  if (!IsObjectId(id)) return Place{};
  const std::string loose = id.substr(0, 2) + "/" + id.substr(2);
  Result<std::optional<OpenedFile>> file =
      OpenRegular(git_, "objects/" + loose, kGitObjectFileMax, false);
  if (file && *file) return Place{Where::kLoose, ""};
  const size_t raw = id.size() / 2;
  unsigned char want[32];
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < raw; ++i) {
    want[i] = static_cast<unsigned char>(nibble(id[2 * i]) * 16 + nibble(id[2 * i + 1]));
  }
  if (!stores_) {
    if (Result<void> opened = Open(); !opened) {
      stores_.reset();
      return Propagate(opened);
    }
  }
  for (const Store& store : *stores_) {
    if (store.dir) {
      Result<std::optional<OpenedFile>> other =
          OpenRegular(store.dir.Get(), loose, kGitObjectFileMax, false);
      if (other && *other) return Place{Where::kAlternate, ""};
    }
    if (const PackIndex* pack = FindPacked(store.packs, want, raw)) {
      return store.dir ? Place{Where::kAlternate, ""} : Place{Where::kPacked, pack->name};
    }
  }
  return Place{};
}

// Whether the host's object store has object `id` (hex) (HostObjectStore).
Result<bool> HostHasObject(int host_git_fd, const std::string& id) {
  HostObjectStore store(host_git_fd);
  Result<HostObjectStore::Place> place = store.Find(id);
  if (!place) return Propagate(place);
  return place->where != HostObjectStore::Where::kAbsent;
}

// Sets the modification time of the host's object `relative` (a loose object or a pack beneath
// the host's .git) to now, as git does when it would write an object it already has; false when
// it is gone.
Result<bool> TouchHostObjectFile(int host_git_fd, const std::string& relative) {
  Result<std::optional<OpenedFile>> file =
      OpenRegular(host_git_fd, relative, std::numeric_limits<uint64_t>::max(), false);
  if (!file) return Propagate(file);
  if (!*file) return false;
  // An ordinary user's daemon may not touch another user's object in a shared repository; git's
  // own freshen gives up there too (it writes a copy instead), and the ref is kept as before.
  if (::futimens((*file)->fd.Get(), nullptr) != 0 && errno != EPERM && errno != EACCES) {
    return std::unexpected(Errno("futimens", relative));
  }
  return true;
}

// Makes the host's objects `ids` recent for the person's own `git prune --expire` and `git repack
// -A` (what `git gc` runs), before a ref or index that names them is written: a prune that read
// the refs before that write keeps every object whose time is past its expiry, and checks the
// time just before it deletes (outside review 15: a branch revived on a month-old unreachable
// commit named a commit the person's prune then deleted). Loose objects get their own time, a
// packed one its pack's, as git freshens them. Then each is looked for again, so one pruned
// before it was touched is seen. Nullopt, or why the objects cannot be kept now.
Result<std::optional<std::string>> FreshenHostObjects(int host_git_fd,
                                                      const std::vector<std::string>& ids) {
  HostObjectStore store(host_git_fd);
  std::set<std::string> packs;
  for (const std::string& id : ids) {
    Result<HostObjectStore::Place> place = store.Find(id);
    if (!place) return Propagate(place);
    if (place->where == HostObjectStore::Where::kLoose) {
      Result<bool> touched =
          TouchHostObjectFile(host_git_fd, "objects/" + id.substr(0, 2) + "/" + id.substr(2));
      if (!touched) return Propagate(touched);
      if (*touched) continue;
      store.Forget();  // gone since: pruned, or packed by a repack
      place = store.Find(id);
      if (!place) return Propagate(place);
    }
    if (place->where == HostObjectStore::Where::kPacked) {
      packs.insert(place->pack.substr(0, place->pack.size() - 4) + ".pack");
      continue;
    }
    // An alternate's: another repository's, which this one's gc never prunes; left untouched.
    if (place->where == HostObjectStore::Where::kAlternate) continue;
    if (place->where == HostObjectStore::Where::kAbsent) {
      return std::optional<std::string>("its object " + id +
                                        " is not in the host's objects (a prune of the "
                                        "person's may have removed it)");
    }
  }
  for (const std::string& pack : packs) {
    Result<bool> touched = TouchHostObjectFile(host_git_fd, "objects/pack/" + pack);
    if (!touched) return Propagate(touched);
  }
  store.Forget();
  for (const std::string& id : ids) {
    Result<HostObjectStore::Place> place = store.Find(id);
    if (!place) return Propagate(place);
    if (place->where == HostObjectStore::Where::kAbsent) {
      return std::optional<std::string>("its object " + id +
                                        " left the host's objects while it was kept (a prune "
                                        "or repack of the person's)");
    }
  }
  return std::optional<std::string>();
}

// Whether a session pack whose version-2 index (`idx`, held in memory) git wrote may come back
// for the objects it holds that the host has too (HostHasObject); `why` says why not, or the
// fault of a malformed index. An object both hold is the same object: the host's `git
// index-pack` that wrote the index compared it with the host's byte for byte (its collision
// check, in the host's repository; git searches packs first and never rehashes them). A pack of
// the session's `git repack -d` holds the objects of earlier commits that came back loose, and
// refusing every such pack left the commit after them on no host ref for good (outside review
// 44). One that brings nothing new is refused, and such packs (`pack_size` each) come back up to
// the session's `shared_budget`, so that repacks repeating the person's objects stay bounded.
Result<bool> PackMayComeBack(int host_git_fd, std::string_view idx, uint64_t pack_size,
                             uint64_t& shared_budget, std::string& why) {
  if (idx.size() < 8 + 1024 || idx.substr(0, 8) != std::string_view("\377tOc\0\0\0\2", 8)) {
    why = "not a version-2 pack index";
    return false;
  }
  auto be32 = [&](size_t at) {
    auto b = [&](size_t i) {
      return static_cast<uint32_t>(static_cast<unsigned char>(idx[at + i]));
    };
    return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
  };
  const uint64_t total = be32(8 + 4 * 255);
  // The object ids' size: what the index's length fits (ids, CRCs, offsets, two checksums);
  // both sizes are read when both fit, and the larger count of the host's objects counts.
  uint64_t shared = 0;
  for (const size_t raw : {size_t{20}, size_t{32}}) {
    if (8 + 1024 + total * (raw + 8) + 2 * raw > idx.size()) continue;
    uint64_t here = 0;
    for (uint64_t i = 0; i < total; ++i) {
      Result<bool> has = HostHasObject(host_git_fd, HexEncode(idx.substr(8 + 1024 + i * raw, raw)));
      if (!has) return Propagate(has);
      here += *has ? 1 : 0;
    }
    shared = std::max(shared, here);
  }
  if (shared == 0) return true;
  if (shared == total) {
    why = "every one of its " + std::to_string(total) + " objects is the host's already";
    return false;
  }
  if (pack_size > shared_budget) {
    why = "it repeats " + std::to_string(shared) + " of the host's objects, past the session's " +
          std::to_string(kGitSharedPackBytesPerSession >> 20) + " MiB of such packs";
    return false;
  }
  shared_budget -= pack_size;
  return true;
}

// Takes the host's packed-refs.lock as git does (O_EXCL), trying a few times over a short while
// as git's core.packedRefsTimeout does; nullopt when someone else holds it still. The caller
// removes it.
Result<std::optional<UniqueFd>> LockPackedRefs(int host_git_fd) {
  constexpr int kTries = 5;
  constexpr auto kPause = std::chrono::milliseconds(20);
  for (int attempt = 0;; ++attempt) {
    const int fd = ::openat(host_git_fd, "packed-refs.lock",
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return std::optional<UniqueFd>(UniqueFd(fd));
    if (errno != EEXIST) return std::unexpected(Errno("openat O_EXCL", "packed-refs.lock"));
    if (attempt + 1 == kTries) return std::optional<UniqueFd>();
    std::this_thread::sleep_for(kPause);
  }
}

// Replaces the host's packed-refs with `text` while the caller holds packed-refs.lock: written
// to packed-refs.new (only the lock's holder writes it), made durable, renamed into place.
Result<void> ReplacePackedRefs(int host_git_fd, std::string_view text,
                               const std::optional<GitOwner>& owner) {
  const char* const temp = "packed-refs.new";
  const int fd =
      ::openat(host_git_fd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(Errno("openat", temp));
  UniqueFd out(fd);
  auto fail = [&](Error error) -> Result<void> {
    ::unlinkat(host_git_fd, temp, 0);
    return std::unexpected(std::move(error));
  };
  if (Result<void> chowned = Chown(out.Get(), owner, temp); !chowned) return fail(chowned.error());
  if (Result<void> wrote = WriteAll(out.Get(), text, temp); !wrote) return fail(wrote.error());
  if (::fsync(out.Get()) != 0) return fail(Errno("fsync", temp));
  out.Reset();
  if (::renameat(host_git_fd, temp, host_git_fd, "packed-refs") != 0) {
    return fail(Errno("renameat", "packed-refs"));
  }
  return {};
}

// The new values of the host's stash log's entries (its stashes).
std::set<std::string, std::less<>> HostStashes(int host_git_fd) {
  std::set<std::string, std::less<>> stashes;
  Result<std::optional<std::string>> text =
      ReadFile(host_git_fd, "logs/refs/stash", 16u << 20, false);
  if (!text || !*text) return stashes;
  std::string_view rest(**text);
  for (size_t end; (end = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(end + 1)) {
    const std::string_view line = rest.substr(0, end);
    const size_t space = line.find(' ');
    if ((space == 40 || space == 64) && line.size() > 2 * space + 1 && line[2 * space + 1] == ' ') {
      stashes.emplace(line.substr(space + 1, space));
    }
  }
  return stashes;
}

// Whether the host's stash log has an entry whose new value is `value` (an older stash).
bool StashLogHolds(int host_git_fd, const std::string& value) {
  return HostStashes(host_git_fd).contains(value);
}

// Removes `relative` of the host's .git when it is an empty directory, as git does before it
// writes a ref or a log where one is (a deletion of `X/y` by a tool that keeps its directories
// leaves `X` so). The kernel refuses anything but an empty directory (no link is followed).
void RemoveEmptyDirectoryAt(int git_fd, const std::string& relative) {
  std::string leaf;
  Result<std::optional<UniqueFd>> parent = ParentDir(git_fd, relative, false, leaf, std::nullopt);
  if (parent && *parent) ::unlinkat((**parent).Get(), leaf.c_str(), AT_REMOVEDIR);
}

// Removes the directories above `relative` (a file of the host's .git just removed) while each
// is empty, keeping its first `keep` components (`refs/heads`, `logs/refs/heads`), as git's
// deletion does: a directory `X` left by the deletion of branch `X/y` kept a branch `X` from
// ever coming back, and HEAD and the index with it (outside review 41).
void RemoveEmptyParents(int git_fd, std::string relative, size_t keep) {
  for (size_t slash; (slash = relative.rfind('/')) != std::string::npos;) {
    relative.resize(slash);
    if (static_cast<size_t>(std::count(relative.begin(), relative.end(), '/')) + 1 <= keep) return;
    std::string leaf;
    Result<std::optional<UniqueFd>> parent = ParentDir(git_fd, relative, false, leaf, std::nullopt);
    if (!parent || !*parent || ::unlinkat((**parent).Get(), leaf.c_str(), AT_REMOVEDIR) != 0) {
      return;
    }
  }
}

// Writes one ref to the host: compare-and-swap against `expected` (nullopt: the host must have
// none). `value` nullopt deletes it. Returns false on a conflict (`why` says what).
Result<bool> UpdateHostRef(int host_git_fd, const std::string& name,
                           const std::optional<std::string>& expected,
                           const std::optional<std::string>& value, std::string& why,
                           const std::optional<GitOwner>& owner) {
  std::optional<std::string> seen;
  auto unchanged = [&]() -> Result<bool> {
    Result<std::optional<std::string>> now = HostRef(host_git_fd, name);
    if (!now) return Propagate(now);
    seen = *now;
    return *now == expected;
  };
  auto moved = [&] {
    why = name + ": the host moved it to " + seen.value_or("(none)") +
          " since the session started from " + expected.value_or("(none)") + "; left as it is";
    return false;
  };
  if (value) {
    RemoveEmptyDirectoryAt(host_git_fd, name);
    RemoveEmptyDirectoryAt(host_git_fd, "logs/" + name);
  }
  if (Result<bool> same = unchanged(); !same) {
    return Propagate(same);
  } else if (!*same) {
    return moved();
  }
  std::string leaf;
  Result<std::optional<UniqueFd>> parent =
      ParentDir(host_git_fd, name, value.has_value(), leaf, owner);
  if (!parent) return Propagate(parent);
  if (value) {
    const std::string content = *value + "\n";
    Result<bool> wrote = WriteLikeGit((**parent).Get(), leaf, {.fd = -1, .data = content}, 0644,
                                      /*replace=*/true, owner, /*durable=*/true, unchanged);
    if (!wrote) return Propagate(wrote);
    return *wrote ? true : moved();
  }
  // Delete, in git's order: the loose file's lock, the packed-refs line, the loose file. The
  // packed-refs line is dropped from the file as it is under git's lock: one read before it
  // undid a person's `git pack-refs` that committed in between, and the branches it had packed
  // (their loose files pruned) were gone (outside review 15).
  const std::string lock = leaf + ".lock";
  if (*parent) {
    const int fd = ::openat((**parent).Get(), lock.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return std::unexpected(Errno("openat O_EXCL", name + ".lock"));
    ::close(fd);
  }
  auto unlock = [&] {
    if (*parent) ::unlinkat((**parent).Get(), lock.c_str(), 0);
  };
  Result<bool> same = unchanged();
  if (!same || !*same) {
    unlock();
    if (!same) return Propagate(same);
    return moved();
  }
  // packed-refs.lock is held from the read of packed-refs until the loose file is gone, whether
  // or not packed-refs names the ref, as git's deletion holds it: a person's `git pack-refs`
  // (what gc runs) holds it from reading the loose refs until it commits, and a loose branch it
  // had read came back packed after the copy-back deleted it (outside review 16). The new
  // packed-refs is written beside (packed-refs.new, as git's is) so the lock stays held.
  Result<std::optional<UniqueFd>> packed_lock = LockPackedRefs(host_git_fd);
  if (!packed_lock || !*packed_lock) {
    unlock();
    if (!packed_lock) return Propagate(packed_lock);
    why = name +
          ": the host's packed-refs is locked (a git pack-refs or gc of the person's); "
          "not deleted now";
    return false;
  }
  auto unlock_packed = [&] { ::unlinkat(host_git_fd, "packed-refs.lock", 0); };
  // Read whole only when it names the ref (the memo, current under the lock, says whether).
  PackedRefsMemo local;
  Result<const std::map<std::string, std::string>*> names = HostPackedRefs(host_git_fd, local);
  Result<std::optional<std::string>> packed =
      !names                     ? Result<std::optional<std::string>>(Propagate(names))
      : (*names)->contains(name) ? ReadFile(host_git_fd, "packed-refs", kGitPackedRefsMax, false)
                                 : Result<std::optional<std::string>>(std::nullopt);
  Result<void> rewritten = !packed ? Result<void>(Propagate(packed)) : Result<void>();
  if (packed && *packed) {
    const std::string dropped = DropPacked(**packed, name);
    if (dropped != **packed) rewritten = ReplacePackedRefs(host_git_fd, dropped, owner);
  }
  if (!rewritten) {
    unlock_packed();
    unlock();
    return Propagate(rewritten);
  }
  // Removes `file` of `dir` when it is a regular file (never a link or a directory).
  auto unlink_file = [](int dir, const std::string& file) {
    struct stat st {};
    if (::fstatat(dir, file.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      ::unlinkat(dir, file.c_str(), 0);
    }
  };
  if (*parent) unlink_file((**parent).Get(), leaf);
  unlock_packed();
  unlock();
  RemoveEmptyParents(host_git_fd, name, 2);
  // Its log goes with it, as git's does: one left behind made the person's later branch
  // `X/...` fail ("Not a directory"), or showed a dropped stash again (outside review 15).
  std::string log_leaf;
  Result<std::optional<UniqueFd>> log_dir =
      ParentDir(host_git_fd, "logs/" + name, false, log_leaf, owner);
  if (log_dir && *log_dir) unlink_file((**log_dir).Get(), log_leaf);
  RemoveEmptyParents(host_git_fd, "logs/" + name, 3);
  return true;
}

// Copies one regular file of the private directory into `host_dir` under the same name unless
// the host has it. Returns whether it was written.
// `check`, when given, is run on the written copy (`name.lock` in `host_dir`, which only the daemon
// writes) before it is renamed into place: false keeps nothing and says why in `refused`.
// `deferred` set by the check: not refused for good, a later copy-back looks again. `judged`: the
// session files (FileKey) refused for good before, never read again; a refusal adds to it.
// `first`, when given, is run on the session's own file before anything is written: what fails it
// never reaches the host's .git (a refused object had been copied there and fsync'd before its
// check, at every copy-back the session renamed it: outside review 28).
using ContentCheck = std::function<bool(int fd, uint64_t size, std::string& why, bool& deferred)>;
Result<bool> CopyObjectFile(int private_dir, int host_dir, const std::string& name,
                            const std::string& what, GitLines& refused,
                            const std::optional<GitOwner>& owner, const ContentCheck& check = {},
                            std::set<std::string>* judged = nullptr,
                            const ContentCheck& first = {}) {
  Result<std::optional<OpenedFile>> file = OpenRegular(private_dir, name, kGitObjectFileMax, true);
  if (!file) {
    refused.push_back(what + ": " + file.error().message);
    return false;
  }
  if (!*file) return false;
  struct stat st {};
  if (::fstat((*file)->fd.Get(), &st) != 0) return std::unexpected(Errno("fstat", what));
  const std::string key = FileKey((*file)->fd.Get(), "");
  if (judged != nullptr && judged->contains(key)) return false;  // refused already
  if (Sparse(st)) {
    refused.push_back(what + ": a sparse file (" + std::to_string(st.st_size) + " bytes, " +
                      std::to_string(static_cast<uint64_t>(st.st_blocks) * 512) + " allocated)");
    return false;
  }
  if (::fstatat(host_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return false;
  // Checked again once copied, before the rename: holes punched while the copy ran.
  const int source = (*file)->fd.Get();
  if (first) {
    std::string why;
    bool deferred = false;
    if (!first(source, (*file)->size, why, deferred)) {
      refused.push_back(what + ": " + why);
      if (judged != nullptr && !deferred) Judge(*judged, key);
      return false;
    }
  }
  std::string why;
  bool deferred = false;
  auto still_dense = [&]() -> Result<bool> {
    struct stat now {};
    if (::fstat(source, &now) != 0) return std::unexpected(Errno("fstat", what));
    if (Sparse(now)) return false;
    if (!check) return true;
    Result<std::optional<OpenedFile>> copy =
        OpenRegular(host_dir, name + ".lock", kGitObjectFileMax, true);
    if (!copy || !*copy) return std::unexpected(Errno("openat2", what + " (the copy)"));
    return check((*copy)->fd.Get(), (*copy)->size, why, deferred);
  };
  Result<bool> wrote =
      WriteLikeGit(host_dir, name, {.fd = source, .data = {}, .limit = (*file)->size}, 0444,
                   /*replace=*/false, owner, /*durable=*/true, still_dense);
  if (!wrote) {
    refused.push_back(what + ": " + wrote.error().message);
    return false;
  }
  if (!why.empty()) {
    refused.push_back(what + ": " + why);
    if (judged != nullptr && !deferred) Judge(*judged, key);
  }
  return *wrote;
}

// Whether an entry of the private objects directory may be copied: a regular file with one link
// and a name `valid` accepts. Git's own temporary files (`tmp_prefix`) are skipped quietly;
// anything else is refused with a line.
bool CopyableObjectFile(const DirEntry& e, const std::string& what, bool (*valid)(std::string_view),
                        std::string_view tmp_prefix, std::string_view invalid, GitLines& refused) {
  if (e.type != S_IFREG || e.links != 1) {
    refused.push_back(what + ": " + (e.type == S_IFREG ? "a hard-linked file" : Describe(e.type)));
    return false;
  }
  if (!valid(e.name)) {
    if (!e.name.starts_with(tmp_prefix)) refused.push_back(what + ": " + std::string(invalid));
    return false;
  }
  return true;
}

// The object id size of the repository the snapshot was taken from: 32 bytes when any of its ids
// is SHA-256 (64 digits), else 20 (an index read with the wrong size fails SafeIndex: refused).
size_t IndexHashSize(const GitSnapshot& snapshot) {
  // An empty sha256 repository has no id to tell by: guessing sha1 let a sha1 pack into it
  // (outside review 11).
  if (snapshot.hash_size != 0) return snapshot.hash_size;
  if (IsObjectId(snapshot.head) && snapshot.head.size() == 64) return 32;
  for (const auto& [name, value] : snapshot.refs) {
    if (IsObjectId(value)) return value.size() == 64 ? 32 : 20;
  }
  return 20;
}

// The session's pack `name` (in `my_packs`) copied into a scratch directory of this process (the
// session may rewrite its own file while it is read: only the copy is checked and kept) and
// indexed there by the host's git, into `scratch`. False when the file is gone or was judged
// before.
struct ScratchPack {
  UniqueFd pack;     // the checked copy, at offset 0; its directory is already removed
  std::string name;  // hex, as git named it
  std::string idx;   // the index git wrote
};
// The id git's `--strict` check said it did not receive (an object named that neither the pack
// nor the host's repository holds), when `said` (its refusal) says so.
std::optional<std::string> MissingObjectIn(const std::string& said, size_t hash_size) {
  static constexpr std::string_view kMissing = "did not receive expected object ";
  const size_t at = said.find(kMissing);
  if (at == std::string::npos) return std::nullopt;
  std::string id = said.substr(at + kMissing.size(), hash_size * 2);
  if (!IsObjectId(id)) return std::nullopt;
  return id;
}

// The object git's `--strict` check refused as named by another (one it did not receive, or
// found as another type than it is named as), when `said` (its refusal) says so.
std::optional<std::string> LinkGitRefused(const std::string& said, size_t hash_size) {
  if (std::optional<std::string> missing = MissingObjectIn(said, hash_size)) return missing;
  // `object <id>: expected type <named>, found <type>` (named from outside the pack), or
  // `object <id> is a <named>, not a <type>` (named as another type by an object of the pack
  // git read first).
  for (const std::string_view after :
       {std::string_view(": expected type "), std::string_view(" is a ")}) {
    const size_t at = said.find(after);
    if (at == std::string::npos || at < hash_size * 2) continue;
    std::string id = said.substr(at - hash_size * 2, hash_size * 2);
    if (IsObjectId(id)) return id;
  }
  return std::nullopt;
}

// The first object id (of `hash_size`) in `said`, or empty.
std::string FirstObjectIdIn(const std::string& said, size_t hash_size) {
  const size_t digits = hash_size * 2;
  for (size_t i = 0; i + digits <= said.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(said[i]))) continue;
    size_t run = i;
    while (run < said.size() && std::isxdigit(static_cast<unsigned char>(said[run]))) ++run;
    if (run - i == digits && IsObjectId(said.substr(i, digits))) return said.substr(i, digits);
    i = run;
  }
  return {};
}

// The session files held back for an object they name (GitSnapshot::objects_awaiting), as one
// copy-back sees them: which of the awaited objects the host has now (one `git cat-file
// --batch-check` of the host's, when any file waits).
class Awaits {
 public:
  Awaits(int host_git_fd, std::map<std::string, std::string>& held) : held_(held) {
    if (held_.empty()) return;
    std::set<std::string> ids;
    for (const auto& [key, id] : held_) ids.insert(id);
    Result<std::map<std::string, std::string>> types =
        HostObjectTypes(host_git_fd, std::vector<std::string>(ids.begin(), ids.end()));
    if (!types) return;  // none counts as there: the files wait on
    for (const auto& [id, type] : *types) {
      if (type != "missing") present_.insert(id);
    }
  }
  // The id the file `key` waits for, or nullopt when it does not wait (again): never held, or
  // its object is on the host now or among `arriving`.
  std::optional<std::string> Waits(const std::string& key,
                                   const std::set<std::string>& arriving = {}) {
    auto it = held_.find(key);
    if (it == held_.end()) return std::nullopt;
    if (present_.contains(it->second) || arriving.contains(it->second)) {
      held_.erase(it);
      return std::nullopt;
    }
    return it->second;
  }
  // Holds the file `key` until `id` arrives; false when the memory is full (the caller then
  // refuses the file for good).
  bool Hold(const std::string& key, const std::string& id) {
    if (key.empty() || (held_.size() >= kGitAwaitedFilesMax && !held_.contains(key))) return false;
    held_[key] = id;
    return true;
  }

 private:
  std::map<std::string, std::string>& held_;
  std::set<std::string> present_;
};

// A directory of this process's under the git work directory (`<prefix>XXXXXX`), removed with
// what it holds when this goes.
struct ScratchDirectory {
  std::filesystem::path path;
  ScratchDirectory() = default;
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};
Result<void> MakeScratchDirectory(const std::string& prefix, ScratchDirectory& made) {
  std::optional<std::filesystem::path> work = GitWorkDirectory();
  if (!work) return Fail(ErrorKind::kInternal, "no git work directory to check objects in");
  std::string dir = (*work / (prefix + "XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) return std::unexpected(Errno("mkdtemp", dir));
  made.path = dir;
  return {};
}

Result<bool> IndexSessionPack(int my_packs, const std::string& name, size_t hash_size,
                              int host_git_fd, std::set<std::string>& judged,
                              ScratchPack& scratch) {
  Result<std::optional<OpenedFile>> file = OpenRegular(my_packs, name, kGitObjectFileMax, true);
  if (!file) return Propagate(file);
  if (!*file) return false;
  struct stat st {};
  if (::fstat((*file)->fd.Get(), &st) != 0) return std::unexpected(Errno("fstat", name));
  if (!Judge(judged, FileKey((*file)->fd.Get(), ""))) return false;
  if (Sparse(st)) {
    return Fail(ErrorKind::kPolicyDenied,
                "a sparse file (" + std::to_string(st.st_size) + " bytes, " +
                    std::to_string(uint64_t(st.st_blocks) * 512) + " allocated)");
  }
  ScratchDirectory removed;
  if (Result<void> made = MakeScratchDirectory("pack-", removed); !made) return Propagate(made);
  const std::filesystem::path copy = removed.path / "session.pack";
  scratch.pack.Reset(
      ::open(copy.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!scratch.pack) return std::unexpected(Errno("open", copy.string()));
  if (Result<void> copied =
          CopyBytes((*file)->fd.Get(), scratch.pack.Get(), (*file)->size, name, copy.string());
      !copied) {
    return Propagate(copied);
  }
  Result<IndexedPack> indexed = IndexPack(copy, hash_size, host_git_fd);
  if (!indexed) return Propagate(indexed);
  if (::lseek(scratch.pack.Get(), 0, SEEK_SET) != 0)
    return std::unexpected(Errno("lseek", copy.string()));
  scratch.name = std::move(indexed->name);
  scratch.idx = std::move(indexed->idx);
  return true;
}

// Session packs indexed per copy-back; the rest wait for the next one.
constexpr size_t kPacksPerCopyBack = 16;
// Bytes of session packs copied and indexed per copy-back, past the first pack (which always
// goes, so that any pack comes back); the rest wait.
constexpr uint64_t kPackBytesPerCopyBack = 1ull << 30;

// The session's packs (`my_packs`, its objects/pack), each copied into a scratch directory of this
// process, indexed there by the host's git (git_objects.h: every object's name computed from its
// contents, and each object the host has too compared with the host's, so that no content of
// the session's stands under a host id: git searches packs before loose objects and never
// rehashes what a pack holds; the session's .idx and .rev are never used), refused when it
// brings nothing new or repeats the host's objects past the session's bound (PackMayComeBack),
// then written
// into the host's objects/pack under the name git gave it, .pack before .idx (git sees a pack
// once its index is there).
Result<size_t> CopyBackPacks(int my_packs, int host_objects, int host_git_fd, GitSnapshot& snapshot,
                             Awaits& awaits, GitLines& refused,
                             const std::optional<GitOwner>& owner) {
  const size_t hash_size = IndexHashSize(snapshot);
  std::set<std::string>& judged = snapshot.judged_files;
  size_t copied = 0;
  size_t looked_at = 0;  // packs this copy-back indexed
  uint64_t bytes = 0;    // and their size
  bool too_many = false;
  Result<std::vector<DirEntry>> entries =
      List(my_packs, "objects/pack", kGitListedEntriesMax, &too_many);
  if (!entries) return Propagate(entries);
  if (too_many) {
    refused.push_back("objects/pack: more than " + std::to_string(kGitListedEntriesMax) +
                      " entries; no pack in it is copied");
  }
  // Oldest first: a pack git made later may name objects of an earlier one, and git's check
  // wants those on the host already.
  std::vector<std::pair<struct timespec, const DirEntry*>> by_age;
  for (const DirEntry& e : *entries) {
    struct stat st {};
    if (::fstatat(my_packs, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) st = {};
    by_age.emplace_back(st.st_mtim, &e);
  }
  std::stable_sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.tv_sec, a.first.tv_nsec) < std::tie(b.first.tv_sec, b.first.tv_nsec);
  });
  std::optional<UniqueFd> host_packs;
  for (const auto& [mtime, entry] : by_age) {
    const DirEntry& e = *entry;
    const std::string what = "objects/pack/" + e.name;
    if (!CopyableObjectFile(e, what, ValidPackFile, "tmp_", "not a pack file name", refused) ||
        !e.name.ends_with(".pack")) {
      continue;
    }
    struct stat seen {};
    const std::string key = FileKey(my_packs, e.name.c_str());
    if (::fstatat(my_packs, e.name.c_str(), &seen, AT_SYMLINK_NOFOLLOW) == 0 &&
        (judged.contains(key) || awaits.Waits(key))) {
      continue;  // refused or copied by an earlier copy-back, or waiting for an object it names
    }
    // Each pack costs a run of the host's `git index-pack` and a search of the host's packs:
    // a bounded number per copy-back (2,000 one-object packs held a close 35-51 s: outside
    // review 10); the others wait for the next one.
    if (looked_at == kPacksPerCopyBack ||
        (looked_at > 0 && static_cast<uint64_t>(seen.st_size) > kPackBytesPerCopyBack - bytes)) {
      refused.push_back("objects/pack: left for the next copy-back (this one indexed " +
                        std::to_string(looked_at) + " packs, " + std::to_string(bytes >> 20) +
                        " MiB)");
      break;
    }
    ++looked_at;
    bytes += std::min<uint64_t>(static_cast<uint64_t>(seen.st_size), kPackBytesPerCopyBack);
    // Each session pack is indexed once: refused or copied, the same file is not read again
    // (indexing a pack takes git seconds, and each send's copy-back would do it again).
    ScratchPack scratch;
    Result<bool> indexed =
        IndexSessionPack(my_packs, e.name, hash_size, host_git_fd, judged, scratch);
    if (!indexed) {
      // A pack naming an object the host lacks waits for it, whatever else arrives (each look
      // costs a run of git); past the memory's bound it stays refused.
      std::optional<std::string> missing = MissingObjectIn(indexed.error().message, hash_size);
      if (missing && awaits.Hold(key, *missing)) {
        judged.erase(key);
        refused.push_back(what + ": waits for the object " + *missing +
                          ", which it names and the host does not have");
        continue;
      }
      refused.push_back(what + ": " + indexed.error().message);
      continue;
    }
    if (!*indexed) continue;  // gone since it was listed, or judged before
    std::string why;
    struct stat copied_st {};
    const uint64_t pack_size = ::fstat(scratch.pack.Get(), &copied_st) == 0
                                   ? static_cast<uint64_t>(copied_st.st_size)
                                   : kGitSharedPackBytesPerSession;
    Result<bool> fresh =
        PackMayComeBack(host_git_fd, scratch.idx, pack_size, snapshot.shared_pack_bytes_left, why);
    if (!fresh) return Propagate(fresh);
    if (!*fresh) {
      refused.push_back(what + ": " + why + "; the pack is not copied");
      continue;
    }
    if (!host_packs) {
      Result<UniqueFd> made = MakeDir(host_objects, "pack", 0755, owner);
      if (!made) return Propagate(made);
      host_packs = std::move(*made);
    }
    const std::string base = "pack-" + scratch.name;
    struct stat st {};
    if (::fstatat(host_packs->Get(), (base + ".idx").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      continue;  // the host has this pack
    }
    Result<bool> wrote = WriteLikeGit(host_packs->Get(), base + ".pack",
                                      {.fd = scratch.pack.Get(), .data = {}}, 0444,
                                      /*replace=*/true, owner);
    if (wrote && *wrote) {
      wrote = WriteLikeGit(host_packs->Get(), base + ".idx", {.fd = -1, .data = scratch.idx}, 0444,
                           /*replace=*/false, owner);
    }
    if (!wrote) {
      refused.push_back(what + ": " + wrote.error().message);
      continue;
    }
    copied += *wrote ? 1 : 0;
  }
  return copied;
}

// Loose objects looked at per copy-back (20,000 held a close for 14 s); the rest wait.
constexpr size_t kLooseObjectsPerCopyBack = 4096;

// A loose object of the session's that the host does not have: its directory (an index into
// the directories the walk opened), its file there, its id and how a line names it.
struct LooseCandidate {
  size_t dir = 0;
  std::string file;
  std::string id;
  std::string what;
};

// Git refused a pack of loose objects over `named`, an object not in it (one the objects name
// and the host lacks, or has as another type, or a `.gitmodules` of the host's a tree names):
// the objects of `packed` that name it are refused, each added to `failed`. Those naming an
// object the host lacks wait for it (`awaits`: a tree written before its blob came, a pack not
// copied yet); the others are judged. False when none of them names it (or `named` is empty).
// `budget` bounds what is inflated to read the links (git's pack held at most as much).
bool RefuseWhatNames(const std::string& named, const std::string& said, size_t hash_size,
                     const std::vector<UniqueFd>& session_dirs,
                     const std::vector<const LooseCandidate*>& packed, GitLines& refused,
                     std::set<std::string>& judged, Awaits& awaits, uint64_t& budget,
                     std::set<std::string>& failed) {
  if (named.empty()) return false;
  const bool missing = MissingObjectIn(said, hash_size) == named;
  bool any = false;
  for (const LooseCandidate* c : packed) {
    Result<std::optional<OpenedFile>> file =
        OpenRegular(session_dirs[c->dir].Get(), c->file, kGitObjectFileMax, true);
    if (!file || !*file ||
        !LooseObjectLinksTo((*file)->fd.Get(), (*file)->size, c->id, named, budget)) {
      continue;
    }
    any = true;
    failed.insert(c->id);
    const std::string key = FileKey((*file)->fd.Get(), "");
    if (missing && awaits.Hold(key, named)) {
      refused.push_back(c->what + ": waits for the object " + named +
                        ", which it names and the host does not have");
      continue;
    }
    refused.push_back(c->what + ": names " + named + ", which git refuses (" + said + ")");
    Judge(judged, key);
  }
  return any;
}

// Packs of loose objects checked per copy-back (runs of the host's `git index-pack`): git stops
// at the first object its fsck refuses, so the pack is made again without it; after this many
// the rest wait for the next copy-back.
constexpr int kFsckRoundsPerCopyBack = 3;

// The ids of `candidates` that git's fsck rules pass (outside review 38: a commit without a tree,
// or a tree naming a file twice, made the person's `git fsck`, `git gc` and a push to a checking
// server fail). They go into one pack of this process's (LooseObjectPack: each is inflated and
// hashed against its name on the way), which the host's git indexes with `--fsck-objects`
// (IndexPack). An object git names in its refusal is refused for good (`judged`) and the pack is
// made again without it; a refusal that names none of them keeps them all back this time. What
// fails its name is refused for good too; what is past the inflate budget (kGitInflateBudget for
// all the rounds together) waits. The copy that follows copies only what passed (an object's
// content is fixed by its name).
Result<std::set<std::string>> LooseObjectsGitPasses(int host_git_fd, size_t hash_size,
                                                    const std::vector<UniqueFd>& session_dirs,
                                                    const std::vector<LooseCandidate>& candidates,
                                                    GitLines& refused,
                                                    std::set<std::string>& judged, Awaits& awaits) {
  std::set<std::string> passed;
  std::set<std::string> failed;
  // One budget for every round: a copy-back inflates at most kGitInflateBudget into its packs,
  // and as much again reading the links of the objects packed (RefuseWhatNames: the first
  // round's reads always fit, so each copy-back refuses at least one object git refused).
  uint64_t budget = kGitInflateBudget;
  uint64_t links_budget = kGitInflateBudget;
  for (int round = 1;; ++round) {
    ScratchDirectory scratch;
    if (Result<void> made = MakeScratchDirectory("loose-", scratch); !made) return Propagate(made);
    const std::filesystem::path path = scratch.path / "loose.pack";
    UniqueFd pack(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!pack) return std::unexpected(Errno("open", path.string()));
    LooseObjectPack writer(pack.Get(), hash_size);
    std::vector<const LooseCandidate*> packed;
    for (const LooseCandidate& c : candidates) {
      if (failed.contains(c.id)) continue;
      Result<std::optional<OpenedFile>> file =
          OpenRegular(session_dirs[c.dir].Get(), c.file, kGitObjectFileMax, true);
      if (!file || !*file) continue;
      std::string why;
      bool deferred = false;
      if (writer.Append((*file)->fd.Get(), (*file)->size, c.id, why, budget, deferred)) {
        packed.push_back(&c);
        continue;
      }
      refused.push_back(c.what + ": " + why);
      if (!deferred) Judge(judged, FileKey((*file)->fd.Get(), ""));
      failed.insert(c.id);  // not packed again in a later round
    }
    if (packed.empty()) return passed;
    if (Result<void> done = writer.Finish(); !done) return Propagate(done);
    Result<IndexedPack> indexed = IndexPack(path, hash_size, host_git_fd);
    if (indexed) {
      for (const LooseCandidate* c : packed) passed.insert(c->id);
      return passed;
    }
    // The object git refused: the first of the pack's ids its words name.
    const std::string& said = indexed.error().message;
    if (indexed.error().kind != ErrorKind::kPolicyDenied) {
      // Git did not judge the objects (it ran too long, or could not run): they wait.
      refused.push_back("objects: " + said + "; the loose objects wait for the next copy-back");
      return passed;
    }
    // An object of the pack refused for its own form, or one they name (missing, named as
    // another type: the objects naming it are at fault, whether or not it is in the pack).
    std::optional<std::string> linked = LinkGitRefused(said, hash_size);
    const LooseCandidate* culprit = nullptr;
    size_t culprit_at = std::string::npos;
    for (const LooseCandidate* c : packed) {
      const size_t at = linked ? std::string::npos : said.find(c->id);
      if (at < culprit_at) {
        culprit_at = at;
        culprit = c;
      }
    }
    if (culprit != nullptr) {
      refused.push_back(culprit->what + ": " + said + "; it is not copied");
      Judge(judged, FileKey(session_dirs[culprit->dir].Get(), culprit->file.c_str()));
      failed.insert(culprit->id);
    } else if (!RefuseWhatNames(linked ? *linked : FirstObjectIdIn(said, hash_size), said,
                                hash_size, session_dirs, packed, refused, judged, awaits,
                                links_budget, failed)) {
      // Git blamed nothing any of them names (every link of theirs was read): all of them are
      // refused for good, so that the same pack is not checked again at every send (outside
      // review 40).
      refused.push_back("objects: " + said + "; naming no loose object of the " +
                        std::to_string(packed.size()) +
                        " in it, nor one they name: all are refused");
      for (const LooseCandidate* c : packed) {
        Judge(judged, FileKey(session_dirs[c->dir].Get(), c->file.c_str()));
        failed.insert(c->id);
      }
      return passed;
    }
    if (round == kFsckRoundsPerCopyBack) {
      refused.push_back("objects: left for the next copy-back (git's fsck refused " +
                        std::to_string(round) + " loose objects in this one)");
      return passed;
    }
  }
}

Result<size_t> CopyBackObjects(int private_fd, int host_git_fd, GitSnapshot& snapshot,
                               GitLines& refused, const std::optional<GitOwner>& owner) {
  const size_t hash_size = IndexHashSize(snapshot);
  std::set<std::string>& judged = snapshot.judged_files;
  Awaits awaits(host_git_fd, snapshot.objects_awaiting);
  uint64_t budget = kGitInflateBudget;       // the session's files
  uint64_t copy_budget = kGitInflateBudget;  // their copies, judged again
  size_t looked_at = 0;                      // loose objects new to the host, this copy-back
  size_t copied = 0;
  Result<std::optional<UniqueFd>> mine = OpenDir(private_fd, "objects");
  if (!mine) return Propagate(mine);
  if (!*mine) return copied;
  Result<std::optional<UniqueFd>> host = OpenDir(host_git_fd, "objects");
  if (!host) return Propagate(host);
  if (!*host) return Fail(ErrorKind::kInternal, "the host's .git has no objects directory");
  // Packs first: a pack's objects may be what a loose tree or commit names.
  Result<std::optional<UniqueFd>> my_packs = OpenDir((*mine)->Get(), "pack");
  if (my_packs && *my_packs) {
    Result<size_t> packs = CopyBackPacks((*my_packs)->Get(), (*host)->Get(), host_git_fd, snapshot,
                                         awaits, refused, owner);
    if (!packs) return Propagate(packs);
    copied += *packs;
  }
  // Every entry listed counts (kGitListedEntriesMax for the whole walk): names refused, git's
  // temporary files and objects copied before (they stay in the session's copy) alike.
  size_t listed = 0;
  auto cut = [&](const std::string& what) {
    refused.push_back(what + ": the session's objects/ lists more than " +
                      std::to_string(kGitListedEntriesMax) +
                      " entries; the rest are not looked at (`git gc` packs loose objects)");
    return copied;
  };
  bool too_many = false;
  Result<std::vector<DirEntry>> dirs =
      List((*mine)->Get(), "objects", kGitListedEntriesMax, &too_many);
  if (!dirs) return Propagate(dirs);
  if (too_many) return cut("objects");
  listed += dirs->size();
  // The loose objects the host lacks, up to kLooseObjectsPerCopyBack, are gathered first, held
  // to git's fsck rules together, and only those that pass are copied.
  std::vector<UniqueFd> session_dirs;  // the session's objects/xx, and the host's
  std::vector<UniqueFd> host_dirs;
  std::vector<LooseCandidate> candidates;
  std::vector<std::pair<LooseCandidate, std::string>> held;  // and the object each waits for
  bool full = false;
  for (const DirEntry& d : *dirs) {
    if (full) break;
    if (d.name == "pack" || d.name == "info") continue;
    const std::string what = "objects/" + d.name;
    if (d.type != S_IFDIR || !ValidLooseObjectDir(d.name)) {
      if (!d.name.starts_with("tmp_")) refused.push_back(what + ": not a loose object directory");
      continue;
    }
    Result<std::optional<UniqueFd>> sub = OpenDir((*mine)->Get(), d.name);
    if (!sub) return Propagate(sub);
    if (!*sub) continue;
    Result<std::vector<DirEntry>> files =
        List((*sub)->Get(), what, kGitListedEntriesMax - listed, &too_many);
    if (!files) return Propagate(files);
    if (too_many) {
      cut(what);
      break;
    }
    listed += files->size();
    std::optional<UniqueFd> host_sub;
    for (const DirEntry& f : *files) {
      const std::string file_what = what + "/" + f.name;
      if (!CopyableObjectFile(f, file_what, ValidLooseObjectFile, "tmp_obj_", "not an object name",
                              refused)) {
        continue;
      }
      if (!host_sub) {
        Result<UniqueFd> made = MakeDir((*host)->Get(), d.name, 0755, owner);
        if (!made) return Propagate(made);
        host_sub = std::move(*made);
      }
      struct stat there {};
      if (::fstatat(host_sub->Get(), f.name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0) {
        continue;  // copied before (objects are never overwritten)
      }
      const std::string key = FileKey((*sub)->Get(), f.name.c_str());
      if (judged.contains(key)) continue;  // refused before
      const std::string id = d.name + f.name;
      LooseCandidate candidate{
          .dir = session_dirs.size(), .file = f.name, .id = id, .what = file_what};
      // One that waits costs nothing here and counts toward no bound but the memory's.
      if (std::optional<std::string> awaited = awaits.Waits(key); awaited) {
        held.emplace_back(std::move(candidate), *awaited);  // unless it arrives now
        continue;
      }
      if (looked_at == kLooseObjectsPerCopyBack) {
        refused.push_back("objects: left for the next copy-back (this one looked at " +
                          std::to_string(kLooseObjectsPerCopyBack) + " loose objects)");
        full = true;
        break;
      }
      ++looked_at;
      if (id.size() != hash_size * 2) {
        refused.push_back(file_what + ": not an id of this repository's hash");
        continue;
      }
      candidates.push_back(std::move(candidate));
    }
    if (host_sub) {
      session_dirs.push_back(std::move(**sub));
      host_dirs.push_back(std::move(*host_sub));
    }
  }
  // A held object whose awaited object is among this copy-back's is looked at with it.
  std::set<std::string> arriving;
  for (const LooseCandidate& c : candidates) arriving.insert(c.id);
  for (auto& [candidate, awaited] : held) {
    if (!arriving.contains(awaited)) continue;
    (void)awaits.Waits(FileKey(session_dirs[candidate.dir].Get(), candidate.file.c_str()),
                       arriving);
    candidates.push_back(std::move(candidate));
  }
  if (candidates.empty()) return copied;
  Result<std::set<std::string>> passed = LooseObjectsGitPasses(host_git_fd, hash_size, session_dirs,
                                                               candidates, refused, judged, awaits);
  if (!passed) return Propagate(passed);
  for (const LooseCandidate& c : candidates) {
    if (!passed->contains(c.id)) continue;
    // The person's `git gc` (prune-packed) may have removed the host's objects/xx since it was
    // opened: made again, as git's own writer does, rather than a write into a removed
    // directory failing and the object coming a copy-back later (outside review 44).
    if (struct stat dir_st{};
        ::fstat(host_dirs[c.dir].Get(), &dir_st) == 0 && dir_st.st_nlink == 0) {
      Result<UniqueFd> made = MakeDir((*host)->Get(), c.id.substr(0, 2), 0755, owner);
      if (!made) return Propagate(made);
      host_dirs[c.dir] = std::move(*made);
    }
    // Judged on the session's file, then on the copy (the session may change its file in
    // between), each pass within its own budget: what passes has the content git checked.
    auto first = [&c, &budget](int fd, uint64_t size, std::string& why, bool& deferred) {
      return LooseObjectMatchesName(fd, size, c.id, why, budget, deferred);
    };
    auto again = [&c, &copy_budget](int fd, uint64_t size, std::string& why, bool& deferred) {
      return LooseObjectMatchesName(fd, size, c.id, why, copy_budget, deferred);
    };
    Result<bool> wrote = CopyObjectFile(session_dirs[c.dir].Get(), host_dirs[c.dir].Get(), c.file,
                                        c.what, refused, owner, again, &judged, first);
    if (!wrote) return Propagate(wrote);
    copied += *wrote ? 1 : 0;
  }
  return copied;
}

}  // namespace

bool ValidRefName(std::string_view name) {
  if (name.size() > 1024 || !name.starts_with("refs/") || name.ends_with("/") ||
      name.ends_with(".") || name.find("..") != std::string_view::npos ||
      name.find("@{") != std::string_view::npos || name.find("//") != std::string_view::npos) {
    return false;
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' ||
        c == '*' || c == '[' || c == '\\') {
      return false;
    }
  }
  size_t start = 0;
  int components = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view part = name.substr(start, end - start);
    if (part.empty() || part.front() == '.' || part.ends_with(".lock")) return false;
    ++components;
    start = end + 1;
  }
  return components >= 2;
}

namespace {

// A path component git refuses to check out: `.`, `..`, and `.git` as NTFS or HFS+ read it
// (sandbox/git_paths.h).
bool DangerousComponent(std::string_view part) {
  return part.empty() || part == "." || part == ".." || GitNamesDotGit(part);
}

// Why git must not take the path of index entry `n` (mode `mode`) from a session, or nullopt:
// what verify_path refuses to write in a worktree, a mode git never writes, a link git reads
// as configuration.
// A backslash is a separator to Windows' git; `held` (the path is in the index the session
// started from, the person's own: Linux's git takes it) lets it stand (outside review 56).
std::optional<std::string> IndexPathRefusal(const std::string& path, uint32_t mode, uint32_t n,
                                            bool held) {
  if (path.empty() || path.size() > 4096 || (!held && path.find('\\') != std::string::npos)) {
    return "entry " + std::to_string(n) + " has an empty, overlong or backslashed path";
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (DangerousComponent(std::string_view(path).substr(start, slash - start))) {
      return "entry `" + path + "` is not a path git may write in a worktree";
    }
    start = slash + 1;
  }
  // The modes git writes, exactly: another (0104777) reached the person's next commit, which
  // fsck flags (outside review 8).
  const uint32_t type = mode & 0170000;
  if (mode != 0100644 && mode != 0100755 && mode != 0120000 && mode != 0160000) {
    return "entry `" + path + "` has mode " + std::to_string(mode) +
           ", which git never writes (100644, 100755, 120000 or 160000)";
  }
  // git refuses these as links (verify_path, fsck): read as configuration, under any name NTFS
  // or HFS+ reads as theirs.
  if (type == 0120000) {
    const size_t slash = path.rfind('/');
    if (GitNamesConfigurationFile(
            std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1))) {
      return "entry `" + path + "` is a symbolic link git reads as configuration";
    }
  }
  return std::nullopt;
}

uint32_t Be32(std::string_view s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

}  // namespace

namespace {

// An index entry's bytes before its object id: ctime, mtime, dev, ino, mode, uid, gid, size.
constexpr size_t kIndexStatBytes = 40;
// One entry of an index, as far as the copy-back judges it.
struct IndexEntryFacts {
  std::string path;
  uint32_t mode = 0;
  bool assume_valid = false;   // flags bit 0x8000: git stops looking at the file
  bool skip_worktree = false;  // extended flags bit 0x4000: git ignores the file in the worktree
  int stage = 0;               // flags bits 12-13: 0, or 1-3 during a merge
  size_t offset = 0;           // where the entry starts in the index
  std::string_view fixed;      // its stat data, mode, object id (into the parsed index)
};
struct ParsedIndex {
  std::vector<IndexEntryFacts> entries;
  size_t entries_end = 0;    // where the extensions (or the checksum) start
  std::string shared_index;  // a split index's `link` extension: its shared part's id (hex)
  bool sparse = false;       // a sparse index (`sdir`): directories stand for their files
  std::string root_tree;     // the cache-tree's (`TREE`) root tree id (hex), when it is valid
};

// How ParseIndex reads: kJudge for an index the host is to get (each entry's path checked by
// IndexPathRefusal, in git's order, every extension walked, a split or sparse index refused);
// kEveryEntry for an index of the host's git compared entry by entry (every entry kept, bounded,
// a split or sparse index refused, paths and order as git wrote them); kAsGitReads for an index
// the host's git already has (the gitlinks alone kept, a split index's shared part named, a
// sparse one noted, extensions past the entries skipped when malformed).
enum class IndexReading { kJudge, kEveryEntry, kAsGitReads };

// The index parsed (versions 2 to 4); nullopt with `why` naming the first fault. Judged, a path
// `held` has (the index the session started from) may hold a backslash (IndexPathRefusal).
std::optional<ParsedIndex> ParseIndex(
    std::string_view index, size_t hash_size, std::string& why,
    IndexReading reading = IndexReading::kJudge,
    const std::map<std::string, IndexEntryFacts>* held = nullptr) {
  const bool judge = reading == IndexReading::kJudge;
  const bool every_entry = reading != IndexReading::kAsGitReads;
  if (index.size() < 12 + hash_size || !index.starts_with("DIRC")) {
    why = "not a git index (no DIRC header)";
    return std::nullopt;
  }
  const uint32_t version = Be32(index, 4);
  if (version < 2 || version > 4) {
    why = "index version " + std::to_string(version) + " is not 2, 3 or 4";
    return std::nullopt;
  }
  const uint32_t entries = Be32(index, 8);
  const size_t end = index.size() - hash_size;  // the trailing checksum
  size_t at = 12;
  ParsedIndex parsed;
  size_t path_bytes = 0;
  int previous_stage = 0;
  std::string previous;  // version 4: paths are prefix-compressed against the previous one
  for (uint32_t n = 0; n < entries; ++n) {
    const size_t fixed = kIndexStatBytes + hash_size + 2;
    if (at + fixed > end) {
      why = "entry " + std::to_string(n) + " runs past the end";
      return std::nullopt;
    }
    IndexEntryFacts facts;
    facts.offset = at;
    facts.fixed = index.substr(at, kIndexStatBytes + hash_size);
    facts.mode = Be32(index, at + 24);
    const auto flags = static_cast<uint16_t>(
        (static_cast<unsigned char>(index[at + kIndexStatBytes + hash_size]) << 8) |
        static_cast<unsigned char>(index[at + kIndexStatBytes + hash_size + 1]));
    facts.assume_valid = (flags & 0x8000) != 0;
    size_t name_at = at + fixed;
    if (flags & 0x4000) {  // extended flags (version 3 and later)
      if (version < 3) {
        why = "entry " + std::to_string(n) + " has extended flags in a version 2 index";
        return std::nullopt;
      }
      const auto extended =
          static_cast<uint16_t>((static_cast<unsigned char>(index[name_at]) << 8) |
                                static_cast<unsigned char>(index[name_at + 1]));
      // Git knows intent-to-add (0x2000) and skip-worktree (0x4000) and dies on any other bit
      // at every read of the index (outside review 8).
      if (extended & ~uint16_t{0x6000}) {
        why = "entry " + std::to_string(n) + " has extended flags git does not know";
        return std::nullopt;
      }
      facts.skip_worktree = (extended & 0x4000) != 0;
      name_at += 2;
    }
    size_t after = 0;
    if (version == 4) {
      uint64_t strip = 0;
      size_t p = name_at;
      for (int shift = 0;; shift += 7) {  // git's offset varint
        if (p >= end || shift > 56) {
          why = "entry " + std::to_string(n) + " has a malformed path prefix";
          return std::nullopt;
        }
        const auto c = static_cast<unsigned char>(index[p++]);
        strip = (shift == 0) ? (c & 0x7f) : (((strip + 1) << 7) | (c & 0x7f));
        if (!(c & 0x80)) break;
      }
      if (strip > previous.size()) {
        why = "entry " + std::to_string(n) + " strips more than the previous path";
        return std::nullopt;
      }
      const size_t nul = index.find('\0', p);
      if (nul == std::string_view::npos || nul >= end) {
        why = "entry " + std::to_string(n) + " has an unterminated path";
        return std::nullopt;
      }
      facts.path =
          previous.substr(0, previous.size() - strip) + std::string(index.substr(p, nul - p));
      after = nul + 1;
    } else {
      const size_t nul = index.find('\0', name_at);
      if (nul == std::string_view::npos || nul >= end) {
        why = "entry " + std::to_string(n) + " has an unterminated path";
        return std::nullopt;
      }
      facts.path = std::string(index.substr(name_at, nul - name_at));
      after = at + ((name_at - at + facts.path.size() + 8) & ~size_t{7});  // NUL-padded
    }
    // Git takes the path's length from the flags (its low 12 bits, unless all are set) and
    // finds the next entry by it, never by the NUL: a length that disagrees made this walk and
    // git's read different entries, and an entry only git saw became a host hook (outside
    // review 7). Refused in every reading: git's is the one that counts.
    if (const size_t flag_length = flags & 0xFFF;
        flag_length != 0xFFF ? flag_length != facts.path.size() : facts.path.size() < 0xFFF) {
      why = "entry " + std::to_string(n) + "'s path is " + std::to_string(facts.path.size()) +
            " bytes long, but its flags say " + std::to_string(flag_length);
      return std::nullopt;
    }
    // Git's order (by path bytes, then stage): an index out of order made the person's next
    // commit an unsorted tree that fsck and servers refuse (outside review 7).
    facts.stage = (flags >> 12) & 3;
    if (judge && n > 0) {
      const int order = previous.compare(facts.path);
      if (order > 0 || (order == 0 && previous_stage >= facts.stage)) {
        why = "entry " + std::to_string(n) + " (`" + facts.path + "`) is out of git's order";
        return std::nullopt;
      }
      // A path merged (stage 0) and in conflict (stages 1-3) at once: git never writes that,
      // and the person's commit, `git add` and stash all failed on it (outside review 19).
      if (order == 0 && previous_stage == 0) {
        why = "entry " + std::to_string(n) + " (`" + facts.path +
              "`) is in conflict and merged at once";
        return std::nullopt;
      }
    }
    if (std::optional<std::string> refused = IndexPathRefusal(
            facts.path, facts.mode, n, held != nullptr && held->contains(facts.path));
        refused && judge) {
      why = *refused;
      return std::nullopt;
    }
    previous = facts.path;
    previous_stage = facts.stage;
    at = after;
    // Read as the host's git reads it, only the gitlinks are wanted: a prefix-compressed
    // (version 4) index expands about 125 times, and a session's repository may hold one.
    if (!every_entry && (facts.mode & 0170000) != 0160000) continue;
    // Judged, every path is kept: bounded, whatever the compression (a 15 MiB index of version
    // 4 raised the daemon's peak by 1,876 MiB: outside review 8).
    path_bytes += facts.path.size();
    if (path_bytes > kIndexPathBytesMax) {
      why = "its paths take more than " + std::to_string(kIndexPathBytesMax >> 20) +
            " MiB when expanded";
      return std::nullopt;
    }
    parsed.entries.push_back(std::move(facts));
  }
  parsed.entries_end = at;
  if (judge) {
    // A path that is also a directory of another (`a.txt` and `a.txt/x`): git cannot build a
    // tree from it, and every commit of the person's failed (outside review 8).
    std::unordered_set<std::string_view> paths;
    for (const IndexEntryFacts& e : parsed.entries) paths.insert(e.path);
    for (const IndexEntryFacts& e : parsed.entries) {
      for (size_t slash = e.path.find('/'); slash != std::string::npos;
           slash = e.path.find('/', slash + 1)) {
        if (paths.contains(std::string_view(e.path).substr(0, slash))) {
          why = "`" + e.path.substr(0, slash) + "` is both a file and a directory of `" + e.path +
                "`";
          return std::nullopt;
        }
      }
    }
  }
  // Extensions: a four-byte signature and a size each, up to the checksum.
  while (at < end) {
    if (at + 8 > end) {
      why = "a truncated extension header";
      return std::nullopt;
    }
    const std::string_view signature = index.substr(at, 4);
    const uint32_t size = Be32(index, at + 4);
    if (every_entry && (signature == "link" || signature == "sdir")) {
      why = "a split or sparse index (`" + std::string(signature) + "`)";
      return std::nullopt;
    }
    if (size > end - at - 8) {
      if (!judge) break;  // the entries are what is read
      why = "extension `" + std::string(signature) + "` runs past the end";
      return std::nullopt;
    }
    parsed.sparse = parsed.sparse || signature == "sdir";
    if (signature == "link" && size >= hash_size) {
      parsed.shared_index = HexEncode(index.substr(at + 8, hash_size));
    }
    // The root entry: an empty path, its NUL, "<entries> <subtrees>\n", then its tree's id when
    // <entries> is not -1 (an invalidated root).
    if (signature == "TREE" && size > 0 && index[at + 8] == '\0') {
      const std::string_view data = index.substr(at + 8, size);
      const size_t newline = data.find('\n');
      if (newline != std::string_view::npos && data[1] != '-' &&
          data.size() >= newline + 1 + hash_size) {
        parsed.root_tree = HexEncode(data.substr(newline + 1, hash_size));
      }
    }
    at += 8 + size;
  }
  return parsed;
}

// Whether two indexes git wrote hold the same entries (path, mode, stage, object id, flags),
// whatever their stat data and extensions: what a `git status` of the person's, which only
// refreshes stat data, leaves the same (outside review 18).
bool IndexEntriesAlike(std::string_view a, std::string_view b, size_t hash_size) {
  if (a == b) return true;
  std::string ignored;
  // Every entry kept, bounded: a split or sparse index, whose entries are not all there, is
  // never alike. Paths as git wrote them: the person's own `x\y` made every later index
  // "changed", and the session's work waited for good (outside review 56).
  std::optional<ParsedIndex> first = ParseIndex(a, hash_size, ignored, IndexReading::kEveryEntry);
  std::optional<ParsedIndex> second = ParseIndex(b, hash_size, ignored, IndexReading::kEveryEntry);
  if (!first || !second || first->entries.size() != second->entries.size()) {
    return false;
  }
  for (size_t i = 0; i < first->entries.size(); ++i) {
    const IndexEntryFacts& x = first->entries[i];
    const IndexEntryFacts& y = second->entries[i];
    if (x.path != y.path || x.mode != y.mode || x.stage != y.stage ||
        x.assume_valid != y.assume_valid || x.skip_worktree != y.skip_worktree ||
        x.fixed.substr(kIndexStatBytes) != y.fixed.substr(kIndexStatBytes)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool SafeIndex(std::string_view index, size_t hash_size, std::string& why) {
  return ParseIndex(index, hash_size, why).has_value();
}

std::optional<IndexGitlinks> GitlinksOfIndex(std::string_view index, std::string& why) {
  // The object format from the trailing checksum (SHA-1 or SHA-256 of everything before it);
  // an index written without one (index.skipHash: zeros) is tried as SHA-1, then as SHA-256.
  std::vector<size_t> sizes = {20, 32};
  for (size_t size : {size_t{20}, size_t{32}}) {
    if (index.size() > size && GitHashBytes(index.substr(0, index.size() - size), size) ==
                                   index.substr(index.size() - size)) {
      sizes = {size};
      break;
    }
  }
  for (size_t size : sizes) {
    std::optional<ParsedIndex> parsed = ParseIndex(index, size, why, IndexReading::kAsGitReads);
    if (!parsed) continue;
    IndexGitlinks links;
    links.hash_size = size;
    links.shared_index = std::move(parsed->shared_index);
    for (IndexEntryFacts& e : parsed->entries) {
      if ((e.mode & 0170000) == 0160000) links.paths.push_back(std::move(e.path));
    }
    return links;
  }
  return std::nullopt;
}

std::optional<std::string> IndexForHost(std::string_view index,
                                        const std::optional<std::string>& launched,
                                        size_t hash_size, std::string& why,
                                        std::vector<IndexObject>* changed, bool* unmerged,
                                        const std::function<bool()>& sparse_checkout) {
  // What the launch's index already held: a gitlink, a flag or a path the person set stays
  // allowed.
  std::map<std::string, IndexEntryFacts> before;
  if (launched) {
    std::string ignored;
    if (std::optional<ParsedIndex> old =
            ParseIndex(*launched, hash_size, ignored, IndexReading::kEveryEntry)) {
      for (IndexEntryFacts& e : old->entries) before.emplace(e.path, std::move(e));
    }
  }
  std::optional<ParsedIndex> parsed =
      ParseIndex(index, hash_size, why, IndexReading::kJudge, &before);
  if (!parsed) return std::nullopt;
  if (unmerged != nullptr) {
    *unmerged = std::any_of(parsed->entries.begin(), parsed->entries.end(),
                            [](const IndexEntryFacts& e) { return e.stage != 0; });
  }
  std::optional<bool> sparse;  // asked once, at the first new skip-worktree entry
  for (const IndexEntryFacts& e : parsed->entries) {
    auto was = before.find(e.path);
    const bool had = was != before.end();
    if ((e.mode & 0170000) == 0160000 && !(had && (was->second.mode & 0170000) == 0160000)) {
      why = "a new gitlink (submodule entry) `" + e.path +
            "`: the host's git would run git in that directory, whose repository the session may "
            "have made; add submodules from the host";
      return std::nullopt;
    }
    if (e.assume_valid && !(had && was->second.assume_valid)) {
      why = "`" + e.path + "` newly marked assume-unchanged: the host's git would stop seeing it";
      return std::nullopt;
    }
    // In a sparse checkout git marks so every path outside its patterns that a merge, rebase or
    // switch brings (outside review 56), and clears the mark of any such file present in the
    // worktree at its next read (git 2.36 and later), unless sparse.expectFilesOutsideOfPatterns
    // is set. A path new to the index: its file, if any, shows; absent, it is one the person
    // never had. Never one the index held: marked and deleted, the person's file was gone with
    // their git showing nothing (outside review 57).
    if (e.skip_worktree && !(had && was->second.skip_worktree)) {
      if (!had && !sparse) sparse = sparse_checkout && sparse_checkout();
      if (had || !*sparse) {
        why = "`" + e.path + "` newly marked skip-worktree: the host's git would stop seeing it";
        return std::nullopt;
      }
    }
  }
  // The entries only: the extensions are caches git rebuilds (a cache-tree naming another tree
  // than the entries made the person's `git commit` record the session's tree), so none reaches
  // the host. The checksum is computed again over what is kept.
  std::string kept(index.substr(0, parsed->entries_end));
  // Stat data tells git a file is unchanged without reading it: an entry naming the committed
  // blob with the edited file's stat data hid the session's edit from the person's status,
  // diff, restore, stash and commit -a (outside review 7). Every entry the launch's index did
  // not hold byte for byte gets none (zeros), so git reads that file again.
  for (const IndexEntryFacts& e : parsed->entries) {
    if (auto was = before.find(e.path); was != before.end() && was->second.fixed == e.fixed) {
      continue;
    }
    if (changed != nullptr && (e.mode & 0170000) != 0160000) {
      changed->push_back(
          IndexObject{e.path, e.mode, HexEncode(e.fixed.substr(kIndexStatBytes, hash_size))});
    }
    std::fill_n(kept.begin() + static_cast<std::ptrdiff_t>(e.offset), 24,
                '\0');  // c/mtime, dev, ino
    std::fill_n(kept.begin() + static_cast<std::ptrdiff_t>(e.offset) + 28, 12,
                '\0');  // uid, gid, size
  }
  kept += GitHashBytes(kept, hash_size);
  return kept;
}

bool ValidRefValue(std::string_view value) {
  if (IsObjectId(value)) return true;
  if (!value.starts_with("ref: ")) return false;
  return ValidRefName(value.substr(5));
}

bool ValidLooseObjectDir(std::string_view name) { return name.size() == 2 && IsHex(name); }

bool ValidLooseObjectFile(std::string_view name) {
  return (name.size() == 38 || name.size() == 62) && IsHex(name);
}

bool ValidPackFile(std::string_view name) {
  if (!name.starts_with("pack-")) return false;
  name.remove_prefix(5);
  for (const std::string_view suffix : {".pack", ".idx", ".rev"}) {
    if (name.ends_with(suffix)) return IsObjectId(name.substr(0, name.size() - suffix.size()));
  }
  return false;
}

Result<std::map<std::string, std::string>> ParsePackedRefs(std::string_view text) {
  std::map<std::string, std::string> refs;
  size_t start = 0;
  int line_number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    ++line_number;
    start = end + 1;
    if (line.empty() || line.starts_with("#")) continue;
    if (line.starts_with("^")) {
      if (!IsObjectId(line.substr(1))) {
        return Fail(ErrorKind::kPolicyDenied, "packed-refs line " + std::to_string(line_number) +
                                                  " is a malformed peeled id");
      }
      continue;
    }
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || !IsObjectId(line.substr(0, space)) ||
        !ValidRefName(line.substr(space + 1))) {
      return Fail(ErrorKind::kPolicyDenied, "packed-refs line " + std::to_string(line_number) +
                                                " is not `<hex id> <refname>`");
    }
    if (refs.size() >= kGitMaxRefs) {
      return Fail(ErrorKind::kPolicyDenied,
                  "packed-refs holds more than " + std::to_string(kGitMaxRefs) + " refs");
    }
    refs[std::string(line.substr(space + 1))] = std::string(line.substr(0, space));
  }
  return refs;
}

namespace {

// The version of `name` beneath `dir` (VersionKey), or nullopt when there is none.
std::optional<std::string> VersionOf(int dir, const char* name) {
  struct stat st {};
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return VersionKey(st);
}

bool GitLockHeld(int host_git_fd) {
  struct stat st {};
  return ::fstatat(host_git_fd, "index.lock", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
         ::fstatat(host_git_fd, "HEAD.lock", &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// A `git commit` at work leaves the index and HEAD of one state (its staged work, HEAD not moved
// yet): a launch may read them; the copy-back holds the branch meanwhile (HoldOf).
constexpr std::string_view kCommitKeepsOneState[] = {"commit"};

// The top of the host's worktree whose git directory is `dir` ("" the main one,
// "worktrees/<id>/" a linked one): the host .git's parent, or the one the linked worktree's
// `gitdir` names; empty when it has none.
std::filesystem::path WorktreeTop(int host_git_fd, const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) {
    return std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(host_git_fd), ec)
        .parent_path();
  }
  Result<std::optional<std::string>> gitdir =
      ReadFile(host_git_fd, dir + "gitdir", kGitSmallFileMax, false);
  if (!gitdir || !*gitdir) return {};
  // As the kernel shows a working directory: links resolved.
  return std::filesystem::weakly_canonical(std::filesystem::path(Trim(**gitdir)), ec).parent_path();
}

// Whether the person's git is at work in the worktree whose git directory is `dir`, one that may
// move HEAD (PersonsGitRunsIn).
bool PersonsGitAtWork(int host_git_fd, const std::string& dir,
                      std::span<const std::string_view> also_ignored = {}) {
  return PersonsGitRunsIn(WorktreeTop(host_git_fd, dir), also_ignored);
}

// What a launch judges of an index the host's git wrote, from one parse of it.
struct HostIndexFacts {
  std::string root_tree;  // its cache-tree's root when valid (IndexOfAnotherTree), else empty
  // Split (`core.splitIndex`, `git update-index --split-index`): its entries are partly in
  // `sharedindex.<id>` beside it, which the private copy does not have; the session's git could
  // not read its index at all (outside review 51). Such a .git stays read-only, where the
  // session's git reads both.
  bool split = false;
  // Sparse (`git sparse-checkout --sparse-index`, index.sparse): a directory's entry stands for
  // its files, which the judge of the session's index refuses; every commit of the session's
  // would wait for good (outside review 56). Such a .git stays read-only too.
  bool sparse = false;
};

HostIndexFacts HostIndexFactsOf(const std::optional<std::string>& index, size_t hash_size) {
  if (!index || hash_size == 0) return {};
  std::string why;
  std::optional<ParsedIndex> parsed = ParseIndex(*index, hash_size, why, IndexReading::kAsGitReads);
  if (!parsed) return {};
  return {std::move(parsed->root_tree), !parsed->shared_index.empty(), parsed->sparse};
}

// Whether an index git wrote belongs to another commit's tree than the commit `head` (a HEAD
// file's text) names: its cache-tree's root is valid, names another tree, and that tree is the
// one of a commit a ref names, where the person's git could be moving (HostRefHasTree). The
// check for a person whose git the daemon cannot see (PersonsGitAtWork: another pid namespace,
// another user); a `git switch --detach` to a commit no ref names passes it (outside review 52).
// `git switch` and `git reset` write the index, then HEAD or the branch (`git switch` prints the
// local changes it carries between the two, and waits while its output is not read): in between,
// the index is the next commit's tree, with no lock held and nothing changing (outside review 50).
// A `git reset --soft` below a branch's tip leaves it so too. Staged work is not this though its
// root may be valid (a `git commit` writes the cache-tree of what is staged before its editor and
// hooks run, and an aborted one leaves it; so does `git write-tree`, and `git stash apply
// --index`, whose tree is the stash's index commit's): no ref names a commit with that tree
// (outside reviews 51 and 52).
bool IndexOfAnotherTree(int host_git_fd, const std::string& head,
                        const std::map<std::string, std::string>& refs,
                        const HostIndexFacts& index) {
  if (index.root_tree.empty()) return false;
  std::string commit = Trim(head);
  if (commit.starts_with("ref: ")) {
    auto it = refs.find(commit.substr(5));
    if (it == refs.end()) return false;  // an unborn branch: no tree to compare with
    commit = it->second;
  }
  if (!IsObjectId(commit)) return false;
  Result<std::string> tree = HostTreeOf(host_git_fd, commit);
  if (!tree) return true;
  if (*tree == index.root_tree) return false;
  Result<bool> a_refs = HostRefHasTree(host_git_fd, index.root_tree);
  return !a_refs || *a_refs;
}

// The private directory of each linked worktree the host has (kGitPrivateWorktrees/<id>): its
// state files and index copied, an empty logs/, and an empty mount point for each of
// kGitWorktreeReadOnlyFiles the host has (bound read-only at launch). A worktree without a
// regular, well-formed HEAD and a regular gitdir is left to the host's read-only worktrees/.
Result<void> PrepareWorktrees(int host_git_fd, int private_fd, const std::optional<GitOwner>& owner,
                              GitSnapshot& snapshot) {
  Result<std::optional<UniqueFd>> host = OpenDir(host_git_fd, "worktrees");
  if (!host) return Propagate(host);
  if (!*host) return {};
  Result<std::vector<DirEntry>> entries = List((*host)->Get(), "worktrees");
  if (!entries) return Propagate(entries);
  std::sort(entries->begin(), entries->end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  std::optional<UniqueFd> all;
  for (const DirEntry& e : *entries) {
    if (e.type != S_IFDIR || !ValidWorktreeId(e.name)) continue;
    if (snapshot.worktrees.size() == kGitMaxWorktrees) {
      LogWarn("linked worktree " + e.name + ": more than " + std::to_string(kGitMaxWorktrees) +
              " in one repository; it stays read-only in the session");
      continue;
    }
    Result<std::optional<UniqueFd>> dir = OpenDir((*host)->Get(), e.name);
    if (!dir || !*dir) continue;
    const int from = (*dir)->Get();
    struct stat st {};
    Result<std::optional<std::string>> head = ReadFile(from, "HEAD", kGitSmallFileMax, false);
    if (!head || !*head || !ValidRefValue(Trim(**head)) ||
        ::fstatat(from, "gitdir", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    GitWorktreeSnapshot worktree;
    worktree.head = Trim(**head);
    Result<std::optional<std::string>> index = ReadFile(from, "index", kGitIndexMax, false);
    if (!index) return Propagate(index);
    worktree.index = *index;
    // Its HEAD and index as one state, as the main worktree's (ReadLaunchState): not while the
    // person's git holds a lock there, nor with an index of another tree than its HEAD's commit
    // (outside review 50); such a worktree stays read-only in the session.
    const HostIndexFacts index_facts = HostIndexFactsOf(worktree.index, snapshot.hash_size);
    if (index_facts.split || index_facts.sparse) {
      LogWarn("linked worktree " + e.name + ": its index is " +
              (index_facts.split ? "split (core.splitIndex)" : "sparse (index.sparse)") +
              "; it stays read-only in the session");
      ++snapshot.worktrees_left_read_only;
      continue;
    }
    if (GitLockHeld(from) ||
        PersonsGitAtWork(host_git_fd, "worktrees/" + e.name + "/", kCommitKeepsOneState) ||
        IndexOfAnotherTree(host_git_fd, **head, snapshot.refs, index_facts)) {
      LogWarn("linked worktree " + e.name +
              ": the person's git is at work there (a lock held, a `git switch` or the like "
              "running, or its index another commit's tree than its HEAD's); it stays read-only "
              "in the session");
      ++snapshot.worktrees_left_read_only;
      continue;
    }
    if (!all) {
      Result<UniqueFd> made = MakeDir(private_fd, kGitPrivateWorktrees, 0755, owner);
      if (!made) return Propagate(made);
      all = std::move(*made);
    }
    Result<UniqueFd> mine = MakeDir(all->Get(), e.name, 0755, owner);
    if (!mine) return Propagate(mine);
    for (const char* name : kGitWorktreeStateFiles) {
      // HEAD as the snapshot read it: read a second time here, a person's `git switch` in the
      // worktree between the two readings was undone by the session's next copy-back, which
      // took the session's copy for its move (outside review 48).
      Result<std::optional<std::string>> text = std::string_view(name) == "HEAD"
                                                    ? Result<std::optional<std::string>>(*head)
                                                    : ReadFile(from, name, kGitSmallFileMax, false);
      if (!text || !*text) continue;  // absent, a link, a FIFO: not copied
      Result<bool> wrote = WriteLikeGit(mine->Get(), name, {.fd = -1, .data = **text}, 0644,
                                        /*replace=*/true, owner, /*durable=*/false);
      if (!wrote) return Propagate(wrote);
    }
    if (worktree.index) {
      Result<bool> wrote = WriteLikeGit(mine->Get(), "index", {.fd = -1, .data = *worktree.index},
                                        0644, /*replace=*/true, owner, /*durable=*/false);
      if (!wrote) return Propagate(wrote);
    }
    if (Result<UniqueFd> logs = MakeDir(mine->Get(), "logs", 0755, owner); !logs) {
      return Propagate(logs);
    }
    for (const char* name : kGitWorktreeReadOnlyFiles) {
      if (::fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      Result<bool> wrote = WriteLikeGit(mine->Get(), name, {.fd = -1, .data = {}}, 0444,
                                        /*replace=*/true, owner, /*durable=*/false);
      if (!wrote) return Propagate(wrote);
      worktree.read_only_names.emplace_back(name);
    }
    snapshot.worktrees.emplace(e.name, std::move(worktree));
  }
  return {};
}

// The refs a session's work may move on the host: branches, tags and the stash. Any other ref
// changes how the host's git reads what it has: `refs/replace/<id>` makes it read another object
// for that id (a forged commit shown under the host's own HEAD id, a blob written by its
// checkout); `refs/remotes/` would say a branch is up to date with a remote it never reached.
bool CopiedBackRef(const std::string& name) {
  return name.starts_with("refs/heads/") || name.starts_with("refs/tags/") || name == "refs/stash";
}

}  // namespace

bool ValidReflogLine(std::string_view line) {
  if (line.size() > 4096) return false;
  const size_t tab = line.find('\t');
  const std::string_view head = line.substr(0, tab);
  for (const char c : line) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  if (tab != std::string_view::npos && line.find('\t', tab + 1) != std::string_view::npos) {
    return false;
  }
  const size_t first = head.find(' ');
  if (first != 40 && first != 64) return false;
  if (!IsObjectId(head.substr(0, first)) || head.size() < 2 * first + 2 ||
      head[2 * first + 1] != ' ' || !IsObjectId(head.substr(first + 1, first))) {
    return false;
  }
  // `<name> <<email>> <seconds> <+-hhmm>`
  const std::string_view who = head.substr(2 * first + 2);
  const size_t open = who.find('<');
  const size_t close = who.find('>');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
      who.find('<', open + 1) != std::string_view::npos ||
      who.find('>', close + 1) != std::string_view::npos) {
    return false;
  }
  const std::string_view when = who.substr(close + 1);
  if (when.size() < 8 || when[0] != ' ') return false;
  const size_t space = when.find(' ', 1);
  if (space == std::string_view::npos) return false;
  const std::string_view seconds = when.substr(1, space - 1);
  const std::string_view zone = when.substr(space + 1);
  return !seconds.empty() && seconds.size() <= 20 &&
         seconds.find_first_not_of("0123456789") == std::string_view::npos && zone.size() == 5 &&
         (zone[0] == '+' || zone[0] == '-') &&
         zone.substr(1).find_first_not_of("0123456789") == std::string_view::npos;
}

bool ValidWorktreeId(std::string_view id) {
  if (id.empty() || id.size() > 255 || id.front() == '.' || id.ends_with(".lock")) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

// HEAD, the index and the refs as one state of the person's git. git writes them one after
// another (`git switch`: the index, then HEAD; `git reset --hard`: the index, then the branch), so
// a launch reading them once could take HEAD from before the person's switch and the index from
// after it, and the session's ordinary commit put the other branch's files on main (outside
// review 49). They are read while neither index.lock nor HEAD.lock is held, then HEAD, the
// branch it names and the index's identity are read again (after a pause when the index was
// written within the last second, as git's next write comes right after it); a reading they
// disagree with is taken again, a few times, and past that the launch keeps .git read-only.
struct LaunchState {
  std::string head;                  // HEAD's text
  std::optional<std::string> index;  // the index's bytes (none: no index)
  HostIndexFacts index_facts;        // of those bytes
  RefsReading refs;
};

constexpr int kLaunchReadings = 8;
constexpr std::chrono::milliseconds kLaunchReadingPause{20};

Result<LaunchState> ReadLaunchState(int host_git_fd, size_t hash_size) {
  bool another_tree = false;
  bool persons_git = false;
  for (int attempt = 0; attempt < kLaunchReadings; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kLaunchReadingPause);
    if (GitLockHeld(host_git_fd)) continue;
    LaunchState state;
    Result<std::optional<std::string>> head =
        ReadFile(host_git_fd, "HEAD", kGitSmallFileMax, false);
    if (!head) return Propagate(head);
    if (!*head) {
      return Fail(ErrorKind::kPolicyDenied, "the repository has no regular-file HEAD", "HEAD");
    }
    state.head = std::move(**head);
    struct stat index_st {};
    const bool has_index = ::fstatat(host_git_fd, "index", &index_st, AT_SYMLINK_NOFOLLOW) == 0;
    const std::optional<std::string> index_before =
        has_index ? std::optional<std::string>(VersionKey(index_st)) : std::nullopt;
    Result<std::optional<std::string>> index = ReadFile(host_git_fd, "index", kGitIndexMax, false);
    if (!index) return Propagate(index);
    state.index = std::move(*index);
    Result<RefsReading> refs = ReadRefsAsGitDoes(host_git_fd, nullptr, false);
    if (!refs) return Propagate(refs);
    state.refs = std::move(*refs);
    if (has_index) {
      timespec now{};
      ::clock_gettime(CLOCK_REALTIME, &now);
      if (now.tv_sec - index_st.st_mtim.tv_sec <= 1) {
        std::this_thread::sleep_for(kLaunchReadingPause);
      }
    }
    if (GitLockHeld(host_git_fd) || VersionOf(host_git_fd, "index") != index_before) continue;
    Result<std::optional<std::string>> head_again =
        ReadFile(host_git_fd, "HEAD", kGitSmallFileMax, false);
    if (!head_again || !*head_again || **head_again != state.head) continue;
    const std::string target = Trim(state.head);
    if (target.starts_with("ref: ")) {
      const std::string name = target.substr(5);
      Result<std::optional<std::string>> branch = HostRef(host_git_fd, name);
      auto it = state.refs.refs.find(name);
      const std::optional<std::string> read =
          it == state.refs.refs.end() ? std::nullopt : std::optional<std::string>(it->second);
      if (!branch || *branch != read) continue;
    }
    // A git of the person's that writes the index and HEAD at two moments, still at work: what
    // was read may be between the two though nothing changed meanwhile (`git switch` waits for
    // its output to be read between them; outside reviews 50 and 52).
    persons_git = PersonsGitAtWork(host_git_fd, "", kCommitKeepsOneState);
    if (persons_git) continue;
    state.index_facts = HostIndexFactsOf(state.index, hash_size);
    another_tree = IndexOfAnotherTree(host_git_fd, state.head, state.refs.refs, state.index_facts);
    if (another_tree) continue;
    return state;
  }
  return Fail(ErrorKind::kPolicyDenied,
              persons_git
                  ? "the person's git (a `git switch`, `checkout`, `reset`, `stash`, `merge` or "
                    "`rebase`) is at work in the repository; run the session again once it is done"
              : another_tree
                  ? "the repository's index is another commit's tree than HEAD's (a `git switch` "
                    "or `git reset` under way, or a `git reset --soft` below a branch's tip); "
                    "commit, or let git finish, then open the session again"
                  : "the repository's HEAD, index or branch kept changing while the launch read "
                    "them (the person's git at work); run the session again once it is done",
              "HEAD");
}

Result<GitSnapshot> PreparePrivateGit(int host_git_fd, int private_fd,
                                      std::string_view objects_inside,
                                      std::optional<GitOwner> owner) {
  GitSnapshot snapshot;
  // HEAD, the index and the refs: one state of the person's git, read before anything is written.
  // Not known, the index could not be judged (a split index copied, one between two commits'
  // trees taken as one state): .git stays read-only (outside review 56).
  Result<size_t> hash = HostHashSize(host_git_fd);
  if (!hash) return Propagate(hash);
  snapshot.hash_size = *hash;
  Result<LaunchState> state = ReadLaunchState(host_git_fd, snapshot.hash_size);
  if (!state) return Propagate(state);
  if (state->index_facts.split) {
    return Fail(ErrorKind::kPolicyDenied,
                "the repository's index is split (core.splitIndex), which Git for agents does not "
                "copy; `git update-index --no-split-index` and `git config core.splitIndex false` "
                "on the host give the next session a writable .git",
                "index");
  }
  if (state->index_facts.sparse) {
    return Fail(ErrorKind::kPolicyDenied,
                "the repository's index is sparse (index.sparse, `git sparse-checkout "
                "--sparse-index`), which Git for agents does not copy; `git sparse-checkout set "
                "--no-sparse-index` on the host gives the next session a writable .git",
                "index");
  }
  snapshot.head = Trim(state->head);
  if (!ValidRefValue(snapshot.head)) {
    return Fail(ErrorKind::kPolicyDenied,
                "the repository's HEAD is neither a hex id nor `ref: refs/...`; repair it with git "
                "on the host",
                "HEAD");
  }
  if (Result<bool> wrote = WriteLikeGit(private_fd, "HEAD", {.fd = -1, .data = state->head}, 0644,
                                        /*replace=*/true, owner, /*durable=*/false);
      !wrote) {
    return Propagate(wrote);
  }
  // The other state files, the session's own from here on.
  for (const char* name : kGitCopiedStateFiles) {
    if (std::string_view(name) == "HEAD") continue;
    Result<std::optional<std::string>> text = ReadFile(host_git_fd, name, kGitSmallFileMax, false);
    if (!text) {
      if (text.error().kind == ErrorKind::kPolicyDenied) continue;  // a link, a FIFO: not copied
      return Propagate(text);
    }
    if (!*text) continue;
    Result<bool> wrote = WriteLikeGit(private_fd, name, {.fd = -1, .data = **text}, 0644,
                                      /*replace=*/true, owner, /*durable=*/false);
    if (!wrote) return Propagate(wrote);
  }
  if (state->index) {
    Result<bool> wrote = WriteLikeGit(private_fd, "index", {.fd = -1, .data = *state->index}, 0644,
                                      /*replace=*/true, owner, /*durable=*/false);
    if (!wrote) return Propagate(wrote);
    snapshot.index = std::move(*state->index);
  }
  // Refs: the snapshot and the session's copy come from one reading (ReadRefsAsGitDoes): its
  // packed-refs as read, and each well-formed loose ref it took.
  RefsReading* reading = &state->refs;
  snapshot.refs = std::move(reading->refs);
  for (const auto& [name, value] : snapshot.refs) {
    if (CopiedBackRef(name)) snapshot.launch_refs.insert(name);
  }
  if (reading->packed) {
    Result<bool> wrote =
        WriteLikeGit(private_fd, "packed-refs", {.fd = -1, .data = *reading->packed}, 0644,
                     /*replace=*/true, owner, /*durable=*/false);
    if (!wrote) return Propagate(wrote);
  }
  Result<UniqueFd> refs = MakeDir(private_fd, "refs", 0755, owner);
  if (!refs) return Propagate(refs);
  for (const char* sub : {"heads", "tags"}) {
    Result<UniqueFd> made = MakeDir(refs->Get(), sub, 0755, owner);
    if (!made) return Propagate(made);
  }
  for (const auto& [name, value] : reading->loose) {
    const std::string within = name.substr(5);  // beneath refs/
    std::string leaf;
    // Directories made beneath the private refs/ (owned as the rest).
    UniqueFd current(::openat(refs->Get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    size_t start = 0;
    bool ok = current.Valid();
    for (size_t slash; ok && (slash = within.find('/', start)) != std::string::npos;
         start = slash + 1) {
      Result<UniqueFd> next =
          MakeDir(current.Get(), within.substr(start, slash - start), 0755, owner);
      if (!next) return Propagate(next);
      current = std::move(*next);
    }
    leaf = within.substr(start);
    const std::string content = value + "\n";
    Result<bool> wrote = WriteLikeGit(current.Get(), leaf, {.fd = -1, .data = content}, 0644,
                                      /*replace=*/true, owner, /*durable=*/false);
    if (!wrote) return Propagate(wrote);
  }
  // logs/ empty: the session's reflogs are its own (never copied back).
  if (Result<UniqueFd> logs = MakeDir(private_fd, "logs", 0755, owner); !logs)
    return Propagate(logs);
  // objects/: private, with the host's objects as the alternate.
  Result<UniqueFd> objects = MakeDir(private_fd, "objects", 0755, owner);
  if (!objects) return Propagate(objects);
  if (Result<UniqueFd> pack = MakeDir(objects->Get(), "pack", 0755, owner); !pack)
    return Propagate(pack);
  Result<UniqueFd> info = MakeDir(objects->Get(), "info", 0755, owner);
  if (!info) return Propagate(info);
  const std::string alternates = std::string(objects_inside) + "\n";
  if (Result<bool> wrote = WriteLikeGit(info->Get(), "alternates", {.fd = -1, .data = alternates},
                                        0444, /*replace=*/true, owner, /*durable=*/false);
      !wrote) {
    return Propagate(wrote);
  }
  // Mount points for the host's code and configuration (bound read-only at launch).
  for (const GitReadOnlyEntry& entry : kGitReadOnlyEntries) {
    struct stat st {};
    if (::fstatat(host_git_fd, entry.name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (entry.directory) {
      if (!S_ISDIR(st.st_mode)) continue;
      if (Result<UniqueFd> made = MakeDir(private_fd, entry.name, 0755, owner); !made) {
        return Propagate(made);
      }
      snapshot.read_only_names.emplace_back(entry.name);
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    snapshot.read_only_names.emplace_back(entry.name);
    std::string content;
    if (std::string_view(entry.name) == "config") {
      Result<std::optional<std::string>> text =
          ReadFile(host_git_fd, entry.name, kGitSmallFileMax, false);
      if (!text) return Propagate(text);
      if (*text) content = **text;
    }
    if (Result<bool> wrote = WriteLikeGit(private_fd, entry.name, {.fd = -1, .data = content}, 0444,
                                          /*replace=*/true, owner, /*durable=*/false);
        !wrote) {
      return Propagate(wrote);
    }
  }
  for (const char* name : kGitCoveredWhenAbsent) {
    if (std::find(snapshot.read_only_names.begin(), snapshot.read_only_names.end(), name) !=
        snapshot.read_only_names.end()) {
      continue;
    }
    if (Result<UniqueFd> made = MakeDir(private_fd, name, 0755, owner); !made) {
      return Propagate(made);
    }
    snapshot.covered_names.emplace_back(name);
  }
  if (Result<void> worktrees = PrepareWorktrees(host_git_fd, private_fd, owner, snapshot);
      !worktrees) {
    return Propagate(worktrees);
  }
  return snapshot;
}

void MarkSharedWorktrees(int host_git_fd, const std::vector<std::filesystem::path>& roots,
                         GitSnapshot& snapshot) {
  for (auto& [id, worktree] : snapshot.worktrees) {
    Result<std::optional<std::string>> gitdir =
        ReadFile(host_git_fd, "worktrees/" + id + "/gitdir", kGitSmallFileMax, false);
    if (!gitdir || !*gitdir) continue;
    worktree.gitdir = Trim(**gitdir);
    const std::filesystem::path dot_git = std::filesystem::path(worktree.gitdir).lexically_normal();
    if (!dot_git.is_absolute()) continue;
    const std::filesystem::path tree = dot_git.parent_path();
    for (const std::filesystem::path& root : roots) {
      const std::filesystem::path normal = root.lexically_normal();
      const std::filesystem::path relative = tree.lexically_relative(normal);
      if (!relative.empty() && *relative.begin() != "..") {
        worktree.shared = true;
        break;
      }
    }
  }
}

namespace {

// A worktree the session worked in that the person has since moved, or removed and added again
// elsewhere (its `gitdir` no longer what MarkSharedWorktrees read), is the person's from then
// on: its branch is held against the session, and its HEAD and index no longer come back.
void ForgetMovedWorktrees(int host_git_fd, GitSnapshot& snapshot) {
  for (auto& [id, worktree] : snapshot.worktrees) {
    if (!worktree.shared) continue;
    Result<std::optional<std::string>> gitdir =
        ReadFile(host_git_fd, "worktrees/" + id + "/gitdir", kGitSmallFileMax, false);
    if (!gitdir || !*gitdir || Trim(**gitdir) != worktree.gitdir) worktree.shared = false;
  }
}

}  // namespace

Result<bool> HostStillAt(int host_git_fd, const GitSnapshot& snapshot) {
  Result<std::map<std::string, std::string>> refs = ReadRefs(host_git_fd, nullptr, false);
  if (!refs) return Propagate(refs);
  if (*refs != snapshot.refs) return false;
  Result<std::optional<std::string>> head = ReadFile(host_git_fd, "HEAD", 4096, false);
  if (!head) return Propagate(head);
  if (!*head || Trim(**head) != snapshot.head) return false;
  Result<std::optional<std::string>> index = ReadFile(host_git_fd, "index", kGitIndexMax, false);
  if (!index) return Propagate(index);
  if (*index != snapshot.index) return false;
  for (const auto& [id, worktree] : snapshot.worktrees) {
    Result<std::optional<UniqueFd>> dir = OpenDir(host_git_fd, "worktrees/" + id);
    if (!dir) return Propagate(dir);
    if (!*dir) return false;
    Result<std::optional<std::string>> wt_head = ReadFile((*dir)->Get(), "HEAD", 4096, false);
    Result<std::optional<std::string>> wt_index =
        ReadFile((*dir)->Get(), "index", kGitIndexMax, false);
    if (!wt_head || !*wt_head || Trim(**wt_head) != worktree.head || !wt_index ||
        *wt_index != worktree.index) {
      return false;
    }
  }
  return true;
}

namespace {

// Refs moved to a new commit per copy-back (each checked by a run of the host's git).
constexpr size_t kRefsCheckedPerCopyBack = 64;
// Refs written (created, moved or deleted) per copy-back: each is a file, an fsync and a rename
// in the host's .git, and a ref at a tip a host branch names needs no check (outside review 27);
// the rest wait for the next copy-back.
constexpr size_t kRefsWrittenPerCopyBack = 1024;
// The time one copy-back spends checking tips (the host's `git log` of their new commits), and
// one check at most: a history that takes longer is refused for the session's life. A check
// given less than kGitTipCheckMax (the copy-back's time running out) that times out is left for
// a later copy-back instead.
constexpr std::chrono::seconds kGitTipChecksPerCopyBack{30};
constexpr std::chrono::seconds kGitTipCheckMax{20};
// Refusals remembered per repository: past this, a refused tip is still refused, only checked
// again at the next copy-back (outside review 11: a busy session could grow the map by a few
// thousand entries per copy-back, for its whole life).
constexpr size_t kRefusedTipsRemembered = 4096;

// What the copy-back may do with a tip (a ref's or a detached HEAD's new value, a reflog line's
// new id): take it, refuse it (why), or leave it for a later copy-back (this one's check time
// is spent).
struct TipCheck {
  enum class Verdict { kTake, kRefuse, kLater } verdict = Verdict::kTake;
  std::string why;
};

// A tip the session's ref may take: `commit_only` (a branch, the stash, HEAD) names a commit
// itself, never an annotated tag that peels to one (outside review 10: the person's next
// `git commit` on such a branch failed); no new commit adds a gitlink (CommitAddsGitlink);
// the host's git answers within this copy-back's time. Refusals are remembered.
TipCheck CheckTip(int host_git_fd, const std::string& id, bool commit_only, GitSnapshot& snapshot) {
  if (auto it = snapshot.refused_tips.find(id); it != snapshot.refused_tips.end()) {
    return {TipCheck::Verdict::kRefuse, it->second};
  }
  // Passed already in this copy-back (a reflog's lines name the same tip again and again).
  const std::string passed = id + (commit_only ? ":commit" : "");
  if (snapshot.tips_passed.contains(passed)) return {};
  const auto now = std::chrono::steady_clock::now();
  if (now >= snapshot.tip_checks_until) return {TipCheck::Verdict::kLater, ""};
  auto refuse = [&](std::string why) {
    if (snapshot.refused_tips.size() < kRefusedTipsRemembered)
      snapshot.refused_tips.emplace(id, why);
    return TipCheck{TipCheck::Verdict::kRefuse, std::move(why)};
  };
  if (commit_only) {
    // Not remembered: the same tag object is a fine value for a tag (refs/tags/*).
    Result<std::string> type = HostObjectType(host_git_fd, id);
    if (!type) return {TipCheck::Verdict::kRefuse, type.error().message + "; left as it is"};
    if (*type != "commit") {
      return {TipCheck::Verdict::kRefuse,
              "names a " + *type +
                  " object, not a commit (git keeps only commits in branches, the stash and "
                  "HEAD); left as it is"};
    }
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      snapshot.tip_checks_until - std::chrono::steady_clock::now());
  if (left.count() <= 0) return {TipCheck::Verdict::kLater, ""};
  bool timed_out = false;
  ++snapshot.tip_checks;
  Result<std::optional<std::string>> gitlink = CommitAddsGitlink(
      host_git_fd, id, std::min<std::chrono::milliseconds>(left, kGitTipCheckMax), timed_out);
  if (!gitlink) {
    // Cut short by this copy-back's remaining time: a later one gives it the whole time. A
    // check that had it is refused and remembered (outside review 11: a timeout was never
    // remembered, and one slow tip cost every copy-back 30 s and starved the refs after it).
    if (timed_out && left < kGitTipCheckMax) return {TipCheck::Verdict::kLater, ""};
    // A failure over an object git could not read is not remembered: it may be missing only
    // for now (the person's gc removed the directory a loose object of it was being copied
    // into, and the tip was refused for the session: outside review 44). Any other (not a
    // commit, past the output's bound) is final, and checked once (outside review 45).
    const std::string& said = gitlink.error().message;
    if (!timed_out && (said.find("Could not read") != std::string::npos ||
                       said.find("bad object") != std::string::npos ||
                       said.find("unable to read") != std::string::npos)) {
      return {TipCheck::Verdict::kRefuse, said + "; left as it is for now"};
    }
    return refuse(said + "; left as it is");
  }
  if (*gitlink) {
    return refuse("a new commit adds the gitlink (submodule entry) " + **gitlink +
                  ": the host's git would run git in that directory once checked out; add "
                  "submodules from the host. Left as it is");
  }
  // What the ref brings that no ref of the host's reaches is made recent before the ref is
  // written (FreshenHostObjects). Not remembered when refused: a later copy-back may find it.
  const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(
      snapshot.tip_checks_until - std::chrono::steady_clock::now());
  if (after.count() <= 0) return {TipCheck::Verdict::kLater, ""};
  Result<std::vector<std::string>> fresh = ObjectsNoHostRefReaches(
      host_git_fd, id, std::min<std::chrono::milliseconds>(after, kGitTipCheckMax), timed_out);
  if (!fresh) {
    if (timed_out && after < kGitTipCheckMax) return {TipCheck::Verdict::kLater, ""};
    return {TipCheck::Verdict::kRefuse, fresh.error().message + "; left as it is"};
  }
  Result<std::optional<std::string>> kept = FreshenHostObjects(host_git_fd, *fresh);
  if (!kept) return {TipCheck::Verdict::kRefuse, kept.error().Describe() + "; left as it is"};
  if (*kept) return {TipCheck::Verdict::kRefuse, **kept + "; left as it is"};
  snapshot.tips_passed.insert(passed);
  return {};
}

std::string AsciiLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

// Whether git reads a short name N from $GIT_DIR/N for a ref it writes itself there: HEAD,
// every *_HEAD (ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, REBASE_HEAD, ...) and the others git
// documents in gitrevisions(7) and writes during merges, bisects and notes merges.
bool IsPseudoRefName(std::string_view name) {
  if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_-") != name.npos) {
    return false;
  }
  for (std::string_view known : {"AUTO_MERGE", "BISECT_EXPECTED_REV", "MERGE_AUTOSTASH",
                                 "NOTES_MERGE_PARTIAL", "NOTES_MERGE_REF"}) {
    if (name == known) return true;
  }
  return name.ends_with("HEAD");
}

// Why git could read a new branch or tag `name` for something else, or cannot keep it
// (outside reviews 8 and 10), or nullopt. git resolves a short name N as refs/N, then
// refs/tags/N, refs/heads/N, refs/remotes/N, refs/remotes/N/HEAD, and only then as an
// abbreviated object id; and it never keeps a ref and a directory of refs under one name
// (`refs/tags/v1` beside `refs/tags/v1/x` made the person's `git gc` fail).
//
// Names are compared ignoring ASCII case too (`folded`: every host and session ref name by its
// lower-case form): on a case-insensitive view of the repository (a Samba export, a clone on
// macOS or Windows) a loose `refs/heads/Main` answers for the person's packed `main`.
std::optional<std::string> NewRefNameClash(
    const std::string& name, const std::map<std::string, std::string>& host,
    const std::map<std::string, std::string>& mine,
    const std::map<std::string, std::vector<std::string>>& folded) {
  auto exists = [&](const std::string& ref) { return host.contains(ref) || mine.contains(ref); };
  // Another ref (not `name` itself) whose name is `ref`'s but for case, or nullopt.
  auto differs_in_case = [&](const std::string& ref) -> std::optional<std::string> {
    auto it = folded.find(AsciiLower(ref));
    if (it == folded.end()) return std::nullopt;
    for (const std::string& other : it->second) {
      if (other != name && other != ref) return other;
    }
    return std::nullopt;
  };
  if (std::optional<std::string> other = differs_in_case(name)) {
    return "differs from the ref " + *other +
           " only in case (a case-insensitive view of the repository reads one for the other); "
           "left as it is";
  }
  // Case aside too (`folded`): `refs/heads/Main/x` beside `main` is a ref and a directory of
  // refs under one name on a case-insensitive view (outside review 18).
  for (size_t slash = name.find('/', 5); slash != std::string::npos;
       slash = name.find('/', slash + 1)) {
    const std::string above = name.substr(0, slash);
    if (auto it = folded.find(AsciiLower(above)); it != folded.end()) {
      return "lies beneath the ref " + (exists(above) ? above : it->second.front()) +
             " (git keeps no ref and directory of refs under one name); left as it is";
    }
  }
  const std::string directory = AsciiLower(name) + "/";
  if (auto it = folded.lower_bound(directory);
      it != folded.end() && it->first.starts_with(directory)) {
    return "is a directory of refs already (" + it->second.front() + "); left as it is";
  }
  const bool tag = name.starts_with("refs/tags/");
  if (!tag && !name.starts_with("refs/heads/")) return std::nullopt;
  const std::string short_name = name.substr(tag ? 10 : 11);
  // git tries $GIT_DIR/N before every ref, for a name of capitals, '-' and '_' (what its
  // refname_is_safe reads there): a tag ORIG_HEAD took the person's undo onto the session's
  // commit while .git/ORIG_HEAD did not exist yet (outside review 16).
  if (IsPseudoRefName(short_name)) {
    return "is the name of one of git's own refs (" + short_name +
           ", read from the git directory before any branch or tag); left as it is";
  }
  for (const std::string& other :
       {"refs/" + short_name, "refs/tags/" + short_name, "refs/heads/" + short_name,
        "refs/remotes/" + short_name, "refs/remotes/" + short_name + "/HEAD"}) {
    if (other != name && exists(other)) {
      return other + " has the same short name; git would read one for the other. Left as it is";
    }
    if (other == name) continue;
    if (std::optional<std::string> alike = differs_in_case(other)) {
      return *alike +
             " has the same short name but for case; git would read one for the other "
             "on a case-insensitive view. Left as it is";
    }
  }
  auto hex = [](std::string_view text) {
    return text.size() >= 4 && text.size() <= 64 &&
           text.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
  };
  // git reads `<anything>-g<hex>` as `git describe` output naming the commit <hex> (review 11).
  const size_t describe = short_name.rfind("-g");
  if (hex(short_name) ||
      (describe != std::string::npos && hex(std::string_view(short_name).substr(describe + 2)))) {
    return "a name git would read as an abbreviated object id (or `git describe` output), in "
           "place of the commit it names; left as it is";
  }
  return std::nullopt;
}

// How the worktree whose git directory is `dir` ("" for the main one, "worktrees/<id>/") holds
// `value` (`ref: refs/heads/X`): as its HEAD (kHead; kState while a merge, cherry-pick or revert
// of the person's is under way there), or, with HEAD detached, as the branch a rebase
// there will finish on (rebase-merge/head-name, rebase-apply/head-name), one a rebase there will
// move (each ref of rebase-merge/update-refs, `git rebase --update-refs`) or the one a bisect
// there started from (BISECT_START holds its short name). What git's branch_checked_out counts:
// a branch held so is never deleted, nor moved unless the session works in that worktree on it,
// nor another HEAD moved onto it (outside reviews 16 and 17).
enum class WorktreeHold { kNone, kHead, kState };

WorktreeHold HoldOf(int host_git_fd, const std::string& dir, const std::string& value) {
  auto text_of = [&](const std::string& file) -> std::optional<std::string> {
    Result<std::optional<std::string>> text = ReadFile(host_git_fd, dir + file, 1u << 20, false);
    if (!text || !*text) return std::nullopt;
    return **text;
  };
  auto reads = [&](const std::string& file, const std::string& expected) {
    std::optional<std::string> text = text_of(file);
    return text && Trim(*text) == expected;
  };
  if (reads("HEAD", value)) {
    // The person's merge, cherry-pick or revert under way there (its resolution staged, not yet
    // committed) holds the branch as a rebase does: the session's commit, copied from the
    // person's MERGE_HEAD into a merge commit, came back as the branch and left the person
    // "still merging" into an empty commit (outside review 22).
    for (const char* operation : {"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD"}) {
      if (text_of(operation)) return WorktreeHold::kState;
    }
    // So does any git of the person's there that moves HEAD or its branch: a `git commit`
    // holds no lock while its hooks and editor run, then moves the branch expecting the value it
    // read, and failed when the session's commit had moved it (outside reviews 51 and 52).
    if (value.starts_with("ref: refs/heads/") && PersonsGitAtWork(host_git_fd, dir)) {
      return WorktreeHold::kState;
    }
    return WorktreeHold::kHead;
  }
  if (!value.starts_with("ref: refs/heads/")) return WorktreeHold::kNone;
  const std::string name = value.substr(5);
  if (reads("rebase-merge/head-name", name) || reads("rebase-apply/head-name", name) ||
      reads("BISECT_START", name.substr(11))) {
    return WorktreeHold::kState;
  }
  // Three lines per ref: its name, the id it had, the id the rebase gives it.
  if (std::optional<std::string> refs = text_of("rebase-merge/update-refs")) {
    std::string_view rest(*refs);
    for (size_t line = 0; !rest.empty(); ++line) {
      const size_t end = std::min(rest.find('\n'), rest.size());
      if (line % 3 == 0 && Trim(std::string(rest.substr(0, end))) == name) {
        return WorktreeHold::kState;
      }
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
  }
  return WorktreeHold::kNone;
}

bool WorktreeHolds(int host_git_fd, const std::string& dir, const std::string& value) {
  return HoldOf(host_git_fd, dir, value) != WorktreeHold::kNone;
}

// The entries of the host's `worktrees/` (one per linked worktree, by id); none when it is
// absent or cannot be opened.
Result<std::vector<DirEntry>> HostWorktrees(int host_git_fd) {
  Result<std::optional<UniqueFd>> worktrees = OpenDir(host_git_fd, "worktrees");
  if (!worktrees || !*worktrees) return std::vector<DirEntry>();
  return List((*worktrees)->Get(), "worktrees");
}

// Whether another worktree of the host (the main one, or a linked one other than `label`'s)
// holds `value` (`ref: refs/heads/X`) now (WorktreeHolds): git never lets two worktrees hold
// one branch, and a HEAD coming back onto one showed the other's commit undone and staged
// (outside review 11).
bool CheckedOutElsewhere(int host_git_fd, const std::string& label, const std::string& value) {
  if (!label.empty() && WorktreeHolds(host_git_fd, "", value)) return true;
  Result<std::vector<DirEntry>> ids = HostWorktrees(host_git_fd);
  if (!ids) return false;
  for (const DirEntry& e : *ids) {
    const std::string other = "worktrees/" + e.name + "/";
    if (other != label && WorktreeHolds(host_git_fd, other, value)) return true;
  }
  return false;
}

// Whether any worktree of the host (the main one or a linked one) holds `name` (refs/heads/X)
// now: checked out, or being rebased or bisected there.
bool CheckedOutOnTheHost(int host_git_fd, const std::string& name) {
  const std::string value = "ref: " + name;
  return WorktreeHolds(host_git_fd, "", value) || CheckedOutElsewhere(host_git_fd, "", value);
}

// What the session's git holds, read once per copy-back, and every decision judged from that one
// reading: each worktree's HEAD ("" the main one, "worktrees/<id>/" a linked one; nullopt when
// missing or not a single-link regular file), then its refs. Read again for each decision, a
// session flipping its HEAD in the background split a branch's move from its index's (outside
// review 22). HEAD is read before the refs, and the index (PlanIndex) after them: a commit made
// meanwhile can leave the index ahead of the refs read (its changes shown staged, until the next
// copy-back brings the commit), never behind them (the commit shown undone).
struct SessionView {
  std::map<std::string, std::optional<std::string>> heads;
  std::map<std::string, std::string> refs;
  GitLines refs_refused;

  std::optional<std::string> Head(const std::string& label) const {
    auto it = heads.find(label);
    return it == heads.end() ? std::nullopt : it->second;
  }
};

Result<SessionView> ReadSession(int private_fd, const GitSnapshot& snapshot) {
  SessionView view;
  auto head = [&](const std::string& label, const std::string& path) {
    Result<std::optional<std::string>> text = ReadFile(private_fd, path, 4096, true);
    view.heads[label] =
        text && *text ? std::optional<std::string>(Trim(**text)) : std::optional<std::string>();
  };
  head("", "HEAD");
  for (const auto& [id, worktree] : snapshot.worktrees) {
    head("worktrees/" + id + "/", std::string(kGitPrivateWorktrees) + "/" + id + "/HEAD");
  }
  Result<std::map<std::string, std::string>> refs = ReadRefs(private_fd, &view.refs_refused, true);
  if (!refs) return Propagate(refs);
  view.refs = std::move(*refs);
  return view;
}

// Why the session may not move branch `name` (refs/heads/X) now, or nullopt: a host worktree
// holds it (HoldOf) and the session does not work there on it. The session works in the main
// worktree and in each linked one within its writable roots (GitWorktreeSnapshot::shared), so
// its commit there moves the branch that worktree's HEAD and its own private HEAD both name;
// any other hold (a linked worktree outside the roots, a rebase, a bisect, a rebase's
// --update-refs) is the person's, and git moves no branch held so ("cannot force update the
// branch used by worktree"): the person's rebase could not finish, and a linked worktree's
// HEAD moved under its index, showing the session's commit undone and staged (outside review 17).
// Where the session works on it, `follower` gets that worktree's label ("" the main one,
// "worktrees/<id>/" a linked one): the branch moves with its index (MoveWithIndex).
std::optional<std::string> HeldMoveRefusal(int host_git_fd, const SessionView& session,
                                           const GitSnapshot& snapshot, const std::string& name,
                                           std::optional<std::string>& follower) {
  const std::string value = "ref: " + name;
  auto session_head_is = [&](const std::string& label) { return session.Head(label) == value; };
  const std::string refused =
      ": a worktree of the host holds it (checked out there, or being rebased or bisected, or "
      "with the person's commit, merge, cherry-pick or revert under way), and git moves no "
      "branch held so; left as it is for now";
  switch (HoldOf(host_git_fd, "", value)) {
    case WorktreeHold::kNone:
      break;
    case WorktreeHold::kHead:
      if (!session_head_is("")) return name + refused;
      follower = "";
      break;
    case WorktreeHold::kState:
      return name + refused;
  }
  Result<std::vector<DirEntry>> ids = HostWorktrees(host_git_fd);
  if (!ids) {
    return name + ": the host's worktrees cannot be listed (" + ids.error().message +
           "); left as it is for now";
  }
  for (const DirEntry& e : *ids) {
    const WorktreeHold hold = HoldOf(host_git_fd, "worktrees/" + e.name + "/", value);
    if (hold == WorktreeHold::kNone) continue;
    auto known = snapshot.worktrees.find(e.name);
    const bool works_there = hold == WorktreeHold::kHead && known != snapshot.worktrees.end() &&
                             known->second.shared && session_head_is("worktrees/" + e.name + "/");
    // Held by two worktrees (`git worktree add -f`): no one index goes with it.
    if (!works_there || follower) return name + refused;
    follower = "worktrees/" + e.name + "/";
  }
  return std::nullopt;
}

// Whether the host's index in `dir` holds the entries of `last` (stat data aside: a `git status`
// of the person's refreshes only that), or, with no `last`, is absent like it.
Result<bool> IndexFollows(int dir, const std::optional<std::string>& last, size_t hash_size) {
  Result<std::optional<std::string>> now = ReadFile(dir, "index", kGitIndexMax, false);
  if (!now) return Propagate(now);
  if (!*now || !last) return !*now && !last;
  return IndexEntriesAlike(**now, *last, hash_size);
}

// The index.lock files of the host's worktrees a copy-back holds, by label ("" the main
// worktree, "worktrees/<id>/" a linked one). Each is taken as git takes it (O_EXCL beside the
// index) and held from the check of what the host's index holds until it is written together
// with what goes with it (a branch the session moved there, or HEAD): a person's `git add` in
// between found the branch moved and the index not, the session's commit shown undone and
// staged (outside review 20). A lock still held at the end is removed unwritten, as git removes
// one it does not commit.
class HostIndexLocks {
 public:
  explicit HostIndexLocks(const std::optional<GitOwner>& owner) : owner_(owner) {}
  HostIndexLocks(const HostIndexLocks&) = delete;
  HostIndexLocks& operator=(const HostIndexLocks&) = delete;
  ~HostIndexLocks() {
    for (const auto& [label, lock] : held_) Remove(lock);
  }

  // Holds `label`'s index.lock in `dir` (the host's .git, or its worktrees/<id>) unless held
  // already; false when another holds it (the person's git is writing that index).
  Result<bool> Hold(const std::string& label, int dir) {
    if (held_.contains(label)) return true;
    const std::string what = label + "index.lock";
    const int fd =
        ::openat(dir, "index.lock", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) return false;
    if (fd < 0) return std::unexpected(Errno("openat O_EXCL", what));
    UniqueFd file(fd);
    UniqueFd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
    Result<void> chowned = copy ? Chown(file.Get(), owner_, what)
                                : Result<void>(std::unexpected(Errno("fcntl F_DUPFD", what)));
    if (!chowned) {
      ::unlinkat(dir, "index.lock", 0);
      return std::unexpected(chowned.error());
    }
    held_.emplace(label, Lock{std::move(copy), std::move(file)});
    return true;
  }
  // Writes `content` as `label`'s index through its held lock while `still` holds
  // (CommitLock); the lock is released whatever happens.
  Result<bool> Write(const std::string& label, std::string_view content,
                     const std::function<Result<bool>()>& still) {
    auto node = held_.extract(label);
    if (node.empty()) return std::unexpected(Errno("index.lock", label + "index", EBADF));
    Lock& lock = node.mapped();
    return CommitLock(lock.dir.Get(), "index", std::move(lock.file), {.fd = -1, .data = content},
                      /*replace=*/true, /*durable=*/true, still);
  }
  // Whether `label`'s lock is this copy-back's.
  bool Holds(const std::string& label) const { return held_.contains(label); }
  // Releases `label`'s lock unwritten (nothing when it is not held).
  void Drop(const std::string& label) {
    auto node = held_.extract(label);
    if (!node.empty()) Remove(node.mapped());
  }

 private:
  // `file` stays open while held: its inode is never another file's (CommitLock).
  struct Lock {
    UniqueFd dir;
    UniqueFd file;
  };
  // Removes the lock while it is still the file made here, never a person's own.
  static void Remove(const Lock& lock) {
    struct stat made {};
    if (::fstat(lock.file.Get(), &made) == 0 && SameFileAt(lock.dir.Get(), "index.lock", made)) {
      ::unlinkat(lock.dir.Get(), "index.lock", 0);
    }
  }
  std::optional<GitOwner> owner_;
  std::map<std::string, Lock> held_;
};

// Why no branch of the repository (`host_git_fd`, its .git) is written now, or nullopt, looked at
// just before each write: not while a git of the person's that may land HEAD on another branch
// runs in any of its worktrees (every subcommand that may move HEAD but kGitMovesOnlyHeadsBranch,
// PersonsGitRunsInAny), nor while a worktree's index.lock is another's than this copy-back's (a
// checkout under way by a git the daemon cannot see). `git switch other` reads other's tip,
// writes the index and the files for it (a smudge filter, a large tree: seconds), then points
// HEAD at other without reading it again: the session's move of other meanwhile left the person
// on the session's commit with the old tip's index, its work shown undone and staged (outside
// review 55). One pass over /proc serves the writes that follow it within kFresh, unless a tip
// check ran in between (Stale).
class BranchWriteLook {
 public:
  BranchWriteLook(int host_git_fd, const HostIndexLocks& locks)
      : git_(host_git_fd), locks_(locks) {}

  std::optional<std::string> Refusal() {
    Result<std::vector<DirEntry>> ids = HostWorktrees(git_);
    std::vector<std::string> labels = {""};
    if (ids) {
      for (const DirEntry& e : *ids) {
        if (e.type == S_IFDIR && ValidWorktreeId(e.name))
          labels.push_back("worktrees/" + e.name + "/");
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (!looked_ || now - looked_at_ > kFresh) {
      std::vector<std::filesystem::path> tops;
      for (const std::string& label : labels) tops.push_back(WorktreeTop(git_, label));
      persons_git_ = PersonsGitRunsInAny(tops, kGitMovesOnlyHeadsBranch);
      looked_at_ = now;
      looked_ = true;
    }
    if (persons_git_) {
      return "the person's git that may switch branches (`git switch`, `checkout`, `rebase`, "
             "`worktree`...) is at work in the repository, and may land HEAD on this branch with "
             "the index of the tip it read; left until it ends";
    }
    for (const std::string& label : labels) {
      struct stat st {};
      if (!locks_.Holds(label) &&
          ::fstatat(git_, (label + "index.lock").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        return "the person's git is writing the index of a worktree (" + label +
               "index.lock exists: a checkout there may land HEAD on this branch); left for the "
               "next copy-back";
      }
    }
    return std::nullopt;
  }
  // A tip check ran (seconds, perhaps): the next write looks again.
  void Stale() { looked_ = false; }

 private:
  static constexpr std::chrono::milliseconds kFresh{10};
  int git_;
  const HostIndexLocks& locks_;
  bool looked_ = false;
  std::chrono::steady_clock::time_point looked_at_{};
  bool persons_git_ = false;
};

// The operation git has stopped in, in a worktree's git directory `dir` (git keeps its state per
// worktree: the session's private one, or the host's), or nullopt. HEAD, the index and a branch
// that moves with them wait until it ends. In the session's directory, HEAD and the index are
// the operation's half-way state, and its state files never come back (they are the session's
// text, which git would act on): a stopped rebase's detached HEAD and conflicted index left the
// person on no branch, with unmerged paths and no rebase to abort (outside review 21). In the
// host's, they are the person's (HostWorktreeRefusal, LockFollowingIndex).
std::optional<std::string> OperationInProgress(int dir) {
  static constexpr std::pair<const char*, const char*> kStates[] = {
      {"rebase-merge", "rebase"}, {"rebase-apply", "rebase or am"},
      {"MERGE_HEAD", "merge"},    {"CHERRY_PICK_HEAD", "cherry-pick"},
      {"REVERT_HEAD", "revert"},  {"sequencer", "cherry-pick or revert"},
      {"BISECT_START", "bisect"},
  };
  for (const auto& [name, operation] : kStates) {
    struct stat st {};
    if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) return std::string(operation);
  }
  return std::nullopt;
}

// Takes worktree `label`'s index.lock in `dir` and checks, under it, that its HEAD and index
// hold what the session last saw there (`head`, `last`): why not, or nullopt with the lock held.
// A person who staged something there meanwhile would see the session's commit undone and
// staged, and their next commit revert it (outside review 18): what moves with the index waits
// for them.
std::optional<std::string> LockFollowingIndex(HostIndexLocks& locks, const std::string& label,
                                              int dir, int objects_fd, const std::string& head,
                                              const std::optional<std::string>& last,
                                              size_t hash_size) {
  Result<bool> held = locks.Hold(label, dir);
  if (!held) return held.error().Describe() + "; left as it is for now";
  if (!*held) {
    return "the person's git is writing the index of its worktree (" + label +
           "index.lock exists); left for the next copy-back";
  }
  Result<std::optional<std::string>> host_head = ReadFile(dir, "HEAD", 4096, false);
  if (!host_head || !*host_head || Trim(**host_head) != head) {
    locks.Drop(label);
    return "the host's " + label +
           "HEAD moved since the session last saw it (a checkout of the "
           "person's); left as it is";
  }
  // The person's operation under way there: its HEAD and index are theirs (outside review 23).
  if (std::optional<std::string> operation = OperationInProgress(dir)) {
    locks.Drop(label);
    return "the person's " + *operation + " is in progress in its worktree; left until it ends";
  }
  // Looked for again under the lock: a person's `git commit` started since the first look (the
  // tip checks can take seconds) holds no lock in its hooks and editor (outside review 54).
  if (PersonsGitAtWork(objects_fd, label)) {
    locks.Drop(label);
    return "the person's git is at work in its worktree; left until it ends";
  }
  Result<bool> follows = IndexFollows(dir, last, hash_size);
  if (follows && *follows) return std::nullopt;
  locks.Drop(label);
  if (!follows) return follows.error().Describe() + "; left as it is for now";
  return "the person staged changes in the index of its worktree; moved now, their next commit "
         "would undo the session's. Left as it is until they commit or reset";
}

// What HEAD and the index of one git directory are compared and written against: the main
// directory's (the snapshot's own) or a linked worktree's. `objects_fd` is the host's .git, where
// the objects a HEAD names are looked for; `label` prefixes every line (`worktrees/<id>/`).
struct HeadAndIndex {
  std::string& head;
  std::optional<std::string>& index;
  std::string label;
  std::optional<std::string> session_head;  // the session's, as this copy-back read it
  // The session's value of the branch session_head names (nullopt: detached, or no such branch).
  std::optional<std::string> session_tip;
};

// What one worktree's HEAD and index are judged against, with the session's HEAD and the value
// of the branch it names as `session` read them.
HeadAndIndex StateOf(std::string& head, std::optional<std::string>& index, std::string label,
                     const SessionView& session) {
  HeadAndIndex state{head, index, std::move(label), {}, {}};
  state.session_head = session.Head(state.label);
  if (state.session_head && state.session_head->starts_with("ref: ")) {
    auto tip = session.refs.find(state.session_head->substr(5));
    if (tip != session.refs.end()) state.session_tip = tip->second;
  }
  return state;
}

// Why the host's worktree (`host_dir`; `objects_fd` its repository's .git) takes neither the
// session's HEAD nor its index now, or nullopt: an operation of the person's is under way there
// (a merge, rebase or bisect whose HEAD and index are theirs: a session's `git merge --abort` came
// back and the person's merge concluded without what it merged, outside review 23), or the
// branch the session's HEAD names holds another value on the host than the session's (the
// person moved or deleted it meanwhile: the index of the tip the session saw showed the
// person's commit undone, outside review 23).
std::optional<std::string> HostWorktreeRefusal(int host_dir, int objects_fd,
                                               const HeadAndIndex& state) {
  if (std::optional<std::string> operation = OperationInProgress(host_dir)) {
    return "the person's " + *operation + " is in progress there; left until it ends";
  }
  // A git of the person's at work there: a `git commit` in its hooks or editor holds no lock and
  // moves the HEAD it read; the session's HEAD moved to another branch, or its index written,
  // meanwhile made it fail or undid it (outside review 54).
  if (PersonsGitAtWork(objects_fd, state.label)) {
    return "the person's git is at work there; left until it ends";
  }
  if (!state.session_head || !state.session_head->starts_with("ref: ")) return std::nullopt;
  const std::string branch = state.session_head->substr(5);
  Result<std::optional<std::string>> now = HostRef(objects_fd, branch);
  if (now && *now == state.session_tip) return std::nullopt;
  return "they go with " + branch + ", which holds another value on the host than the session's " +
         "(moved or deleted meanwhile, or the session's commit not come back); left as they are";
}

// Why the index's new entries (`changed`, gitlinks left out by IndexForHost) cannot go to the
// host, or nullopt: each names an object the host has (`objects_fd`, its .git) of the type its
// mode needs, a blob for a file or a link. `git update-index --cacheinfo` takes
// any id: an entry naming a commit made the person's `git gc` fail and their next commit
// record a tree servers refuse, one naming a missing object failed their commit, stash and
// reset (outside review 15). One run of the host's git asks for every id.
std::optional<std::string> IndexObjectRefusal(int objects_fd,
                                              const std::vector<IndexObject>& changed) {
  if (changed.empty()) return std::nullopt;
  std::vector<std::string> ids;
  for (const IndexObject& e : changed) ids.push_back(e.id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  Result<std::map<std::string, std::string>> types = HostObjectTypes(objects_fd, ids);
  if (!types) return types.error().message + "; not written now";
  for (const IndexObject& e : changed) {
    auto it = types->find(e.id);
    const std::string type = it == types->end() ? "missing" : it->second;
    if (type == "blob") continue;
    return "`" + e.path + "` names " + e.id +
           (type == "missing" ? ", an object the host does not have"
                              : ", a " + type + ", where its mode needs a blob") +
           " (git stages no such entry; `git update-index --cacheinfo` does)";
  }
  // An entry may name an old blob no ref reaches: kept from the person's prune as a ref's are.
  Result<std::optional<std::string>> kept = FreshenHostObjects(objects_fd, ids);
  if (!kept) return kept.error().Describe() + "; not written now";
  if (*kept) return **kept + "; not written now";
  return std::nullopt;
}

// What the session's index would become on the host (CopyBackIndex), judged before anything
// that goes with it moves: nothing to write, the bytes to write, or refused (why).
// An index with unmerged entries waits (kWait): a stash pop, a squash merge or a cherry-pick -n
// stopped on a conflict leaves stages 1-3 and no file OperationInProgress knows, and on the host
// the person's next commit failed on them (outside review 22).
struct IndexPlan {
  enum class Kind { kNothing, kWrite, kWait, kRefused } kind = Kind::kNothing;
  std::string bytes;
  std::string why;
};

// The session's index in `private_fd` judged against the one the host has (the launch's, or what
// the last copy-back wrote): its paths and entries (IndexForHost), and the objects they name in
// `objects_fd` (the host's .git, IndexObjectRefusal).
IndexPlan PlanIndex(int private_fd, int objects_fd, size_t hash_size, const HeadAndIndex& state) {
  Result<std::optional<std::string>> index =
      ReadFile(private_fd, "index", kGitSessionIndexMax, true);
  if (!index) return {IndexPlan::Kind::kRefused, "", index.error().message};
  if (!*index || *index == state.index) return {};
  if (!(**index).starts_with("DIRC")) {
    return {IndexPlan::Kind::kRefused, "", "does not start with git's DIRC signature"};
  }
  std::string why;
  std::vector<IndexObject> changed;
  bool unmerged = false;
  std::optional<std::string> kept =
      IndexForHost(**index, state.index, hash_size, why, &changed, &unmerged,
                   [&] { return HostSparseCheckout(objects_fd, state.label); });
  if (!kept) return {IndexPlan::Kind::kRefused, "", why};
  if (*kept == state.index) return {};  // what the host has already
  if (unmerged) {
    return {IndexPlan::Kind::kWait, "",
            "it has unmerged paths (a conflict the session has not resolved)"};
  }
  if (std::optional<std::string> bad = IndexObjectRefusal(objects_fd, changed)) {
    return {IndexPlan::Kind::kRefused, "", *bad};
  }
  return {IndexPlan::Kind::kWrite, std::move(*kept), ""};
}

// Writes the planned index to the host's `host_dir` under its index.lock (held already when a
// branch or HEAD moved with it), only while the host's holds the entries the session last saw
// and the host's HEAD is the one the session works on: after a person's `git checkout -b
// other`, the session's index on `other` showed its commit undone and staged (outside review
// 20). The lock is released either way; a refused plan is said here, once.
bool CopyBackIndex(int host_dir, int objects_fd, size_t hash_size, HeadAndIndex state,
                   HostIndexLocks& locks, IndexPlan& plan, GitCopyBack& done) {
  const std::string what = state.label + "index";
  auto write = [&]() -> bool {
    if (plan.kind == IndexPlan::Kind::kRefused) {
      done.refused.push_back(what + ": " + plan.why);
      return false;
    }
    if (plan.kind == IndexPlan::Kind::kWait) {
      done.conflicts.push_back(what + ": " + plan.why + "; it comes back once they are resolved");
      return false;
    }
    if (plan.kind == IndexPlan::Kind::kNothing) return false;
    // The index goes with the session's HEAD: while that HEAD has not come back (refused, put
    // off), the host's HEAD with the session's index showed the session's files as a change the
    // person had staged, ready for their next commit (outside review 16).
    if (state.session_head != state.head) {
      done.conflicts.push_back(what +
                               ": it goes with the session's HEAD, which did not come back; "
                               "left as it is");
      return false;
    }
    Result<bool> held = locks.Hold(state.label, host_dir);
    if (!held || !*held) {
      done.conflicts.push_back(what + ": " +
                               (held ? "the person's git is writing it (index.lock exists); "
                                       "left for the next copy-back"
                                     : held.error().Describe()));
      return false;
    }
    // Unchanged but for stat data counts as unchanged: a `git status` of the person's refreshes
    // it, and left then, the host's index lagged every later commit of the session's (outside
    // review 18).
    bool head_moved = false;
    std::optional<std::string> refusal;
    auto unchanged = [&]() -> Result<bool> {
      Result<std::optional<std::string>> host_head = ReadFile(host_dir, "HEAD", 4096, false);
      if (!host_head) return Propagate(host_head);
      head_moved = !*host_head || Trim(**host_head) != state.head;
      if (head_moved) return false;
      refusal = HostWorktreeRefusal(host_dir, objects_fd, state);
      if (refusal) return false;
      return IndexFollows(host_dir, state.index, hash_size);
    };
    Result<bool> wrote = locks.Write(state.label, plan.bytes, unchanged);
    if (!wrote || !*wrote) {
      done.conflicts.push_back(
          what + ": " +
          (!wrote       ? wrote.error().Describe()
           : head_moved ? "the host's HEAD moved off the session's (a checkout of the "
                          "person's); left as it is"
           : refusal    ? *refusal
                        : "the host changed it since the session started; left as it is"));
      return false;
    }
    state.index = std::move(plan.bytes);
    return true;
  };
  const bool wrote = write();
  locks.Drop(state.label);
  plan = {};  // said or written: never again in this copy-back
  return wrote;
}

// A worktree's git directories, the session's private one and the host's, with what the
// snapshot holds of its HEAD and index: the main worktree's ("" label: the directories given)
// or a linked one's ("worktrees/<id>/").
struct WorktreeGit {
  std::optional<UniqueFd> mine_dir, host_dir;  // a linked worktree's, opened here
  int mine = -1;
  int host = -1;
  HeadAndIndex state;
};
std::optional<WorktreeGit> OpenWorktreeGit(const std::string& label, int private_fd,
                                           int host_git_fd, GitSnapshot& snapshot,
                                           const SessionView& session) {
  if (label.empty()) {
    return WorktreeGit{
        {}, {}, private_fd, host_git_fd, StateOf(snapshot.head, snapshot.index, "", session)};
  }
  const std::string id = label.substr(10, label.size() - 11);
  auto known = snapshot.worktrees.find(id);
  if (known == snapshot.worktrees.end()) return std::nullopt;
  Result<std::optional<UniqueFd>> mine =
      OpenDir(private_fd, std::string(kGitPrivateWorktrees) + "/" + id);
  Result<std::optional<UniqueFd>> host = OpenDir(host_git_fd, "worktrees/" + id);
  if (!mine || !*mine || !host || !*host) return std::nullopt;
  const int mine_fd = (*mine)->Get();
  const int host_fd = (*host)->Get();
  return WorktreeGit{std::move(*mine), std::move(*host), mine_fd, host_fd,
                     StateOf(known->second.head, known->second.index, label, session)};
}

// The refs the session changed (created, moved, deleted), each by compare-and-swap against
// `snapshot` and only when the host has the object it names (CopyBackPrivateGit).
// `checked_out`, when given, gets the branches the session deleted or moved that a host worktree
// holds now (CheckedOutOnTheHost, HeldMoveRefusal), instead of a conflict line: HEAD's copy-back
// may move off them, and a second call with `only` those names writes them then (a session's
// `git checkout main; git branch -D feature` in one send).
Result<void> CopyBackRefs(int private_fd, int host_git_fd, const SessionView& session,
                          GitSnapshot& snapshot, HostIndexLocks& locks,
                          const std::optional<GitOwner>& owner, GitCopyBack& done,
                          std::vector<std::string>& moved,
                          std::vector<std::string>* checked_out = nullptr,
                          const std::set<std::string>* only = nullptr) {
  const GitLines& read_refused = session.refs_refused;
  const std::map<std::string, std::string>* mine = &session.refs;
  // A ref missing because what held it was refused (a hard-linked or malformed packed-refs, a
  // loose ref that is a link, refs past the count or depth bound) is not a deleted ref: deleting
  // the host's would let one refusal remove every packed branch and tag. While anything in the
  // session's refs is refused, no ref is deleted.
  const bool refs_refused = !read_refused.empty();
  // The host's refs now, for judging new names: a branch the person made, or a remote-tracking
  // ref their fetch brought, since the session started counts as much as one from the start
  // (outside review 11). Unreadable: the launch's, as before.
  Result<std::map<std::string, std::string>> host_now = ReadRefs(host_git_fd, nullptr, false);
  const std::map<std::string, std::string>& host_refs = host_now ? *host_now : snapshot.refs;
  // The commits the host's branches name now.
  std::set<std::string> host_branch_tips;
  for (const auto& [name, value] : host_refs) {
    if (name.starts_with("refs/heads/") && IsObjectId(value)) host_branch_tips.insert(value);
  }
  // Every ref name of the host's and the session's by its lower-case form (NewRefNameClash).
  std::map<std::string, std::vector<std::string>> folded;
  const std::map<std::string, std::string>& mine_refs = *mine;
  for (const auto* refs : {&host_refs, &mine_refs}) {
    for (const auto& [name, value] : *refs) {
      std::vector<std::string>& same = folded[AsciiLower(name)];
      if (std::find(same.begin(), same.end(), name) == same.end()) same.push_back(name);
    }
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : *mine) names.push_back(name);
  for (const auto& [name, value] : snapshot.refs) {
    if (!mine->contains(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  size_t checked_refs = 0;
  BranchWriteLook branch_look(host_git_fd, locks);
  for (const std::string& name : names) {
    if (only != nullptr && !only->contains(name)) continue;
    std::optional<std::string> start;
    if (auto it = snapshot.refs.find(name); it != snapshot.refs.end()) start = it->second;
    std::optional<std::string> now;
    if (auto it = mine->find(name); it != mine->end()) now = it->second;
    if (start == now) continue;
    if (!CopiedBackRef(name)) {
      done.refused.push_back(name + ": only branches, tags and the stash come back");
      continue;
    }
    if (done.refs >= kRefsWrittenPerCopyBack) {
      done.conflicts.push_back(name + ": left for the next copy-back (this one wrote " +
                               std::to_string(kRefsWrittenPerCopyBack) + " refs)");
      continue;
    }
    if (!start && now &&
        (snapshot.refs_made >= kGitRefsMadePerSession ||
         snapshot.refs.size() >= kGitRefsMadeUntil)) {
      done.refused.push_back(name + ": not made on the host: " +
                             (snapshot.refs_made >= kGitRefsMadePerSession
                                  ? "this session made " + std::to_string(kGitRefsMadePerSession) +
                                        " refs there, the most one session makes"
                                  : "the repository holds " + std::to_string(kGitRefsMadeUntil) +
                                        " refs, past which no session makes one") +
                             "; make it on the host");
      continue;
    }
    if (snapshot.launch_refs.contains(name) && (!now || name.starts_with("refs/tags/"))) {
      auto [kept, first] = snapshot.kept_refs.try_emplace(name, now.value_or(""));
      if (first || kept->second != now.value_or("")) {
        kept->second = now.value_or("");
        done.conflicts.push_back(
            name + (now ? ": a tag the person had when the session started is never moved on "
                          "the host; left as it is (a new tag name comes back)"
                        : ": a branch or tag the person had when the session started is never "
                          "deleted on the host; left as it is"));
      }
      continue;
    }
    // The session's `git stash drop` (or `pop`) moves refs/stash back to an older entry of the
    // stash log: so moved on the host, whose log keeps the dropped entry as its newest, the
    // person's stash@{0} and `git stash pop` named the dropped stash while refs/stash named
    // another (outside review 30). The person keeps the stash instead.
    // Nor, over a stash of the host's, to a stash the host's refs/stash or stash log held at any
    // copy-back of the session's (`stashes_seen`): a stash the person dropped or popped since
    // came back on top of their list after the session's own drop exposed it (outside review
    // 36). Onto no stash it may (`git stash store` of a dropped one, outside review 37). Once
    // the memory is full (4,096 stashes) no stash moves over the host's (a session filling it
    // had the hole back, outside review 37).
    bool stash_seen = false;
    if (name == "refs/stash" && start && now) {
      if (snapshot.stashes_seen.size() < kRefusedTipsRemembered) {
        snapshot.stashes_seen.insert(*start);
      }
      stash_seen = snapshot.stashes_seen.contains(*now) ||
                   snapshot.stashes_seen.size() >= kRefusedTipsRemembered;
    }
    if (name == "refs/stash" && now && (stash_seen || StashLogHolds(host_git_fd, *now))) {
      auto [kept, first] = snapshot.kept_refs.try_emplace(name, *now);
      if (first || kept->second != *now) {
        kept->second = *now;
        done.conflicts.push_back(name +
                                 ": the session dropped a stash; the person keeps it (the host's "
                                 "stash is never moved back to an older entry)");
      }
      continue;
    }
    // A new ref git would read for another (`git log main` read the session's tag `main`:
    // outside review 8; a tag `origin/main`, one named as a short commit id, a ref beneath
    // another: review 10), or could not keep.
    if (!start && now) {
      if (std::optional<std::string> why = NewRefNameClash(name, host_refs, *mine, folded)) {
        done.refused.push_back(name + ": " + *why);
        continue;
      }
    }
    // git never deletes a branch a worktree has checked out: the person's HEAD would name no
    // branch, and their next commit would have no parent (outside review 15).
    if (!now && name.starts_with("refs/heads/") && CheckedOutOnTheHost(host_git_fd, name)) {
      if (checked_out != nullptr) {
        checked_out->push_back(name);
        continue;
      }
      done.conflicts.push_back(name +
                               ": checked out on the host (git deletes no branch a worktree "
                               "has checked out); not deleted now");
      continue;
    }
    // (A branch the host moved meanwhile is left by the compare-and-swap below, which says so.)
    const auto on_host = host_refs.find(name);
    const bool host_unmoved = start && on_host != host_refs.end() && on_host->second == *start;
    // A branch made anew too: a host worktree may hold it unborn (`git switch --orphan X`), and
    // the session's branch X made there became the parent of the person's first commit, their
    // index showing its files deleted (outside review 42).
    const bool host_none = !start && on_host == host_refs.end();
    std::optional<std::string> follower;  // the worktree whose index moves with it
    if ((host_unmoved || host_none) && now && name.starts_with("refs/heads/")) {
      if (std::optional<std::string> held =
              HeldMoveRefusal(host_git_fd, session, snapshot, name, follower)) {
        // HEAD's copy-back may move off it first (a session's `git checkout main; git branch -f
        // feature` in one send): tried again after it.
        if (checked_out != nullptr) {
          checked_out->push_back(name);
        } else {
          done.conflicts.push_back(*held);
        }
        continue;
      }
    }
    if (!now && refs_refused) {
      done.conflicts.push_back(name +
                               ": not deleted while the session's refs hold something "
                               "refused; left as it is");
      continue;
    }
    // A tip one of the host's branches names already brings nothing the host does not keep
    // (no new commit, object or gitlink): no check runs the host's git for it. 128 new branches
    // at the person's HEAD in a repository of 20,000 refs spent a copy-back's 30 s of checks
    // under a sanitizer, and half of them waited for later sends.
    if (now && IsObjectId(*now) && !host_branch_tips.contains(*now)) {
      Result<bool> has = HostHasObject(host_git_fd, *now);
      if (!has || !*has) {
        done.conflicts.push_back(name + ": its commit " + *now +
                                 " is not in the host's objects (refused or never written); "
                                 "left as it is");
        continue;
      }
      // Each checked ref costs a run of the host's git: a bounded number per copy-back (3,000
      // new branches held a close for 115 s); the others wait for the next copy-back. A tip
      // refused before costs none, and takes no place (outside review 45).
      if (auto known = snapshot.refused_tips.find(*now); known != snapshot.refused_tips.end()) {
        done.refused.push_back(name + ": " + known->second);
        continue;
      }
      if (checked_refs == kRefsCheckedPerCopyBack) {
        done.conflicts.push_back(name + ": left for the next copy-back (this one checked " +
                                 std::to_string(kRefsCheckedPerCopyBack) + " refs)");
        continue;
      }
      ++checked_refs;
      const TipCheck check = CheckTip(
          host_git_fd, *now, name == "refs/stash" || name.starts_with("refs/heads/"), snapshot);
      branch_look.Stale();
      if (check.verdict == TipCheck::Verdict::kLater) {
        done.conflicts.push_back(name + ": left for the next copy-back (this one's " +
                                 std::to_string(kGitTipChecksPerCopyBack.count()) +
                                 " s of checks are spent)");
        continue;
      }
      if (check.verdict == TipCheck::Verdict::kRefuse) {
        done.refused.push_back(name + ": " + check.why);
        continue;
      }
    }
    if (name.starts_with("refs/heads/")) {
      if (std::optional<std::string> why = branch_look.Refusal()) {
        done.conflicts.push_back(name + ": " + *why);
        continue;
      }
    }
    // A branch a host worktree has checked out, where the session works on it, moves together
    // with that worktree's index, or not at all: the session's index there is judged first
    // (PlanIndex), and that worktree's index.lock held from the check of its HEAD and index
    // (LockFollowingIndex) to the write of both. Taken only now, after the tip's check, so that
    // the person's git waits for the writes alone.
    std::optional<WorktreeGit> worktree =
        follower ? OpenWorktreeGit(*follower, private_fd, host_git_fd, snapshot, session)
                 : std::nullopt;
    IndexPlan plan;
    if (follower) {
      std::optional<std::string> why;
      if (!worktree) {
        why = "the host's or the session's " + *follower + " is gone; left as it is for now";
      } else if (std::optional<std::string> operation = OperationInProgress(worktree->mine)) {
        why = "the session's " + *operation + " is in progress in the worktree that has it; " +
              "it moves once that ends";
      } else {
        plan = PlanIndex(worktree->mine, host_git_fd, IndexHashSize(snapshot), worktree->state);
        if (plan.kind == IndexPlan::Kind::kRefused) {
          why = "the session's index there, which goes with it, is refused (" + plan.why +
                "); left as it is";
        } else if (plan.kind == IndexPlan::Kind::kWait) {
          why = "the session's index there, which goes with it, waits: " + plan.why;
        } else {
          why = LockFollowingIndex(locks, *follower, worktree->host, host_git_fd,
                                   worktree->state.head, worktree->state.index,
                                   IndexHashSize(snapshot));
        }
      }
      if (why) {
        done.conflicts.push_back(name + ": " + *why);
        continue;
      }
    }
    std::string why;
    Result<bool> updated = UpdateHostRef(host_git_fd, name, start, now, why, owner);
    if (!updated || !*updated) {
      if (follower) locks.Drop(*follower);
      done.conflicts.push_back(updated ? why : name + ": " + updated.error().Describe());
      continue;
    }
    if (worktree && CopyBackIndex(worktree->host, host_git_fd, IndexHashSize(snapshot),
                                  worktree->state, locks, plan, done)) {
      if (follower->empty()) {
        done.index = true;
      } else {
        ++done.worktree_files;
      }
    }
    ++done.refs;
    if (!start && now) ++snapshot.refs_made;
    moved.push_back(name);
    if (now) {
      snapshot.refs[name] = *now;
    } else {
      snapshot.refs.erase(name);
      snapshot.reflog_taken.erase(name);  // its log went with it: a new one starts empty
    }
  }
  return {};
}

// Writes `content` as the host's `name` the way git does, only while `unchanged` holds under
// git's lock (compare-and-swap); true when written, else a conflict line in `done`.
bool SwapWholeFile(int host_git_fd, const char* name, const std::string& content,
                   const std::optional<GitOwner>& owner,
                   const std::function<Result<bool>()>& unchanged, GitCopyBack& done) {
  Result<bool> wrote = WriteLikeGit(host_git_fd, name, {.fd = -1, .data = content}, 0644, true,
                                    owner, /*durable=*/true, unchanged);
  if (wrote && *wrote) return true;
  done.conflicts.push_back(std::string(name) + ": " +
                           (wrote ? "the host changed it since the session started; left as it is"
                                  : wrote.error().Describe()));
  return false;
}

// HEAD, on the same rule as a ref (CopyBackPrivateGit). A HEAD that comes with a new index
// (`plan`) moves only with it: not while that index is refused or waits. Any HEAD moves only
// while the host's index holds what the session last saw there, the index.lock taken for that
// check held for the index's copy-back (CopyBackIndex): a person's `git add` between the two
// writes left the session's HEAD over the person's index.
bool CopyBackHead(int host_dir, int objects_fd, HeadAndIndex state, const IndexPlan& plan,
                  GitSnapshot& snapshot, HostIndexLocks& locks,
                  const std::optional<GitOwner>& owner, GitCopyBack& done) {
  const std::string what = state.label + "HEAD";
  if (!state.session_head || !ValidRefValue(*state.session_head)) {
    done.refused.push_back(what + ": missing, not a single-link regular file, or malformed");
    return false;
  }
  const std::string value = *state.session_head;
  // HEAD names a commit or a branch: one naming the person's tag made their next commit move
  // the tag (outside review 8).
  if (value.starts_with("ref: ") && !value.starts_with("ref: refs/heads/")) {
    done.refused.push_back(what + ": names " + value.substr(5) + ", not a branch");
    return false;
  }
  if (value == state.head) return false;
  if (value.starts_with("ref: ") && CheckedOutElsewhere(objects_fd, state.label, value)) {
    done.refused.push_back(what + ": " + value.substr(5) +
                           " is checked out in another worktree (git allows a branch in one "
                           "worktree only); left as it is");
    return false;
  }
  if (IsObjectId(value) && !HostHasObject(objects_fd, value).value_or(false)) {
    done.conflicts.push_back(what + ": its commit " + value +
                             " is not in the host's objects; left as it is");
    return false;
  }
  if (IsObjectId(value)) {
    const TipCheck check = CheckTip(objects_fd, value, /*commit_only=*/true, snapshot);
    if (check.verdict == TipCheck::Verdict::kLater) {
      done.conflicts.push_back(what +
                               ": left for the next copy-back (this one's checks are "
                               "spent)");
      return false;
    }
    if (check.verdict == TipCheck::Verdict::kRefuse) {
      done.refused.push_back(what + ": " + check.why);
      return false;
    }
  }
  if (plan.kind == IndexPlan::Kind::kRefused) {
    done.conflicts.push_back(what + ": the session's index, which goes with it, is refused (" +
                             plan.why + "); left as it is");
    return false;
  }
  if (plan.kind == IndexPlan::Kind::kWait) {
    done.conflicts.push_back(what +
                             ": the session's index, which goes with it, waits: " + plan.why);
    return false;
  }
  // The branch the host's HEAD names holds what the session last saw of it on the host (the
  // snapshot's; the session's own move of it may wait for this HEAD's): a commit of the person's
  // on it meanwhile (their staged changes committed, which leaves the index's entries as they
  // were) was left behind a HEAD moved off it, shown staged again (outside review 25).
  auto left_unmoved = [&]() -> bool {
    if (!state.head.starts_with("ref: ")) return true;  // detached: HEAD's text is the commit
    const std::string branch = state.head.substr(5);
    auto seen = snapshot.refs.find(branch);
    Result<std::optional<std::string>> now = HostRef(objects_fd, branch);
    return now && *now == (seen == snapshot.refs.end() ? std::nullopt
                                                       : std::optional<std::string>(seen->second));
  };
  if (!left_unmoved()) {
    done.conflicts.push_back(what + ": " + state.head.substr(5) +
                             " holds on the host another commit than the session saw there (a "
                             "commit of the person's); left as it is");
    return false;
  }
  // Whether or not the session's index changed: a HEAD moved alone (`git checkout -b`, a
  // detach) over an index the person had changed meanwhile (their commit) showed their commit
  // staged against it, and took their next commit off their branch (outside review 24).
  if (std::optional<std::string> why =
          LockFollowingIndex(locks, state.label, host_dir, objects_fd, state.head, state.index,
                             IndexHashSize(snapshot))) {
    done.conflicts.push_back(what + ": " + *why);
    return false;
  }
  auto head_unchanged = [&]() -> Result<bool> {
    Result<std::optional<std::string>> host_head = ReadFile(host_dir, "HEAD", 4096, false);
    if (!host_head) return Propagate(host_head);
    return *host_head && Trim(**host_head) == state.head && left_unmoved() &&
           !HostWorktreeRefusal(host_dir, objects_fd, state);
  };
  if (!SwapWholeFile(host_dir, "HEAD", value + "\n", owner, head_unchanged, done)) {
    locks.Drop(state.label);
    return false;
  }
  state.head = value;
  return true;
}

// HEAD and the index of one worktree (CopyBackHead, CopyBackIndex), the index judged once for
// both; neither while the session's git has an operation stopped half-way there
// (OperationInProgress), nor while the host's worktree refuses them (HostWorktreeRefusal: the
// person's operation under way, or the branch the session's HEAD names holding another value
// on the host; the index goes with that branch, and came back alone after the person's
// `git commit --amend`, or a refused commit, the session's commit staged for the person's next
// one, outside review 22). Whether each was written.
std::pair<bool, bool> CopyBackHeadAndIndex(int private_fd, int host_dir, int objects_fd,
                                           HeadAndIndex state, GitSnapshot& snapshot,
                                           HostIndexLocks& locks,
                                           const std::optional<GitOwner>& owner,
                                           GitCopyBack& done) {
  std::optional<std::string> wait;
  if (std::optional<std::string> operation = OperationInProgress(private_fd)) {
    wait = "the session's " + *operation + " is in progress; they come back once it ends";
  } else {
    wait = HostWorktreeRefusal(host_dir, objects_fd, state);
  }
  if (wait) {
    Result<std::optional<std::string>> index =
        ReadFile(private_fd, "index", kGitSessionIndexMax, true);
    const bool changed =
        state.session_head != state.head || !index || !*index || *index != state.index;
    if (changed) done.conflicts.push_back(state.label + "HEAD and index: " + *wait);
    return {false, false};
  }
  IndexPlan plan = PlanIndex(private_fd, objects_fd, IndexHashSize(snapshot), state);
  const bool head = CopyBackHead(host_dir, objects_fd, state, plan, snapshot, locks, owner, done);
  const bool index =
      CopyBackIndex(host_dir, objects_fd, IndexHashSize(snapshot), state, locks, plan, done);
  return {head, index};
}

// Each linked worktree's HEAD and index, from its private directory to the host's
// `worktrees/<id>`, on the same rules.
void CopyBackWorktrees(int private_fd, int host_git_fd, const SessionView& session,
                       GitSnapshot& snapshot, HostIndexLocks& locks,
                       const std::optional<GitOwner>& owner, GitCopyBack& done) {
  for (auto& [id, worktree] : snapshot.worktrees) {
    // A worktree outside the roots is the person's: the session reaches none of its files, and
    // its HEAD and index coming back showed the session's commit undone there (outside review
    // 43).
    if (!worktree.shared) continue;
    const std::string label = "worktrees/" + id + "/";
    Result<std::optional<UniqueFd>> mine =
        OpenDir(private_fd, std::string(kGitPrivateWorktrees) + "/" + id);
    Result<std::optional<UniqueFd>> host = OpenDir(host_git_fd, "worktrees/" + id);
    if (!mine || !*mine) {
      done.refused.push_back(label + ": its private directory is gone or not a directory");
      continue;
    }
    if (!host || !*host) {
      done.conflicts.push_back(label + ": the host removed the worktree; left as it is");
      continue;
    }
    const auto [head, index] = CopyBackHeadAndIndex(
        (*mine)->Get(), (*host)->Get(), host_git_fd,
        StateOf(worktree.head, worktree.index, label, session), snapshot, locks, owner, done);
    done.worktree_files += (head ? 1 : 0) + (index ? 1 : 0);
  }
}

// New reflog lines checked (and copied) per log and copy-back; the rest wait for the next one.
constexpr size_t kReflogLinesChecked = 32;
// Bytes of one session log a copy-back reads, from where the last one stopped: kReflogLinesChecked
// lines of git's many times over.
constexpr uint64_t kReflogReadMax = 64u << 10;
// Bytes of reflog lines appended to the host's logs per copy-back (the rest wait) and per session
// (the rest are dropped): a session writing lines of 4 KiB had grown the person's logs 1 MiB per
// send (outside review 33).
constexpr uint64_t kReflogBytesPerCopyBack = 1u << 20;
constexpr uint64_t kReflogBytesPerSession = 64u << 20;
// Bytes of the host's log read from its end to find its last line.
constexpr uint64_t kHostLogTailMax = 16u << 10;

// The old and new values of a well-formed reflog line (ValidReflogLine).
struct ReflogIds {
  std::string_view old_id;
  std::string_view new_id;
};
ReflogIds IdsOf(std::string_view line) {
  const size_t size = line.find(' ');
  return {line.substr(0, size), line.substr(size + 1, size)};
}

// Where the host's log of a ref ends, which the next line appended must continue: the new value of
// its last line, or a line with a null old value (the ref made anew). Absent: a ref git makes
// starts its log with a null old value. Empty (expired): any line. Unreadable (not a regular file,
// a last line longer than the part read, a line being written): none.
struct HostLogEnd {
  enum class Kind { kAbsent, kEmpty, kLine, kUnreadable } kind = Kind::kAbsent;
  std::string last;  // kLine: the last line's new value
  bool operator==(const HostLogEnd&) const = default;
  bool ContinuedBy(std::string_view old_id) const {
    switch (kind) {
      case Kind::kAbsent:
        return old_id.find_first_not_of('0') == std::string_view::npos;
      case Kind::kEmpty:
        return true;
      case Kind::kLine:  // or the making of a branch deleted and made again (outside review 29)
        return old_id == last || old_id.find_first_not_of('0') == std::string_view::npos;
      case Kind::kUnreadable:
        return false;
    }
    return false;
  }
  std::string Key() const { return std::to_string(static_cast<int>(kind)) + ":" + last; }
};

// The last `max` bytes of an opened file (all of it when smaller); nullopt when a read falls short.
std::optional<std::string> ReadTail(const OpenedFile& file, uint64_t max) {
  std::string tail(std::min(file.size, max), '\0');
  const ssize_t got =
      ::pread(file.fd.Get(), tail.data(), tail.size(), static_cast<off_t>(file.size - tail.size()));
  if (got != static_cast<ssize_t>(tail.size())) return std::nullopt;
  return tail;
}

HostLogEnd ReadHostLogEnd(int host_git_fd, const std::string& log) {
  const HostLogEnd unreadable{HostLogEnd::Kind::kUnreadable, ""};
  Result<std::optional<OpenedFile>> file =
      OpenRegular(host_git_fd, log, std::numeric_limits<uint64_t>::max(), false);
  if (!file) return unreadable;
  if (!*file) return {};
  const uint64_t size = (*file)->size;
  if (size == 0) return {HostLogEnd::Kind::kEmpty, ""};
  std::optional<std::string> read = ReadTail(**file, kHostLogTailMax);
  if (!read || read->size() < 2 || read->back() != '\n') return unreadable;
  const std::string& tail = *read;
  const size_t before = tail.rfind('\n', tail.size() - 2);
  if (before == std::string::npos && tail.size() < size) return unreadable;
  std::string_view line(tail);
  line.remove_prefix(before == std::string::npos ? 0 : before + 1);
  line.remove_suffix(1);
  const size_t id = line.find(' ');
  if ((id != 40 && id != 64) || line.size() < 2 * id + 1 || !IsObjectId(line.substr(id + 1, id))) {
    return unreadable;
  }
  return {HostLogEnd::Kind::kLine, std::string(line.substr(id + 1, id))};
}

// Appends `text` to the host's log of `name` under the ref's lock (`<ref>.lock`, as git appends),
// only while the host's ref still holds `ref` and its log ends where `end` says (else kBusy: the
// person's git between, or holding the lock; a later copy-back plans again). The log is made when
// absent, beneath the host's .git without links.
enum class Appended { kDone, kBusy, kNot, kWriteFailed };
Appended AppendToHostLog(int host_git_fd, const std::string& name, const std::string& ref,
                         const HostLogEnd& end, const std::string& text,
                         const std::optional<GitOwner>& owner, GitCopyBack& done) {
  const std::string log = "logs/" + name;
  std::string ref_leaf;
  Result<std::optional<UniqueFd>> ref_dir = ParentDir(host_git_fd, name, true, ref_leaf, owner);
  if (!ref_dir || !*ref_dir) return Appended::kBusy;
  const std::string ref_lock = ref_leaf + ".lock";
  const int lock = ::openat((**ref_dir).Get(), ref_lock.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (lock < 0) return Appended::kBusy;
  ::close(lock);
  auto unlock_ref = [&] { ::unlinkat((**ref_dir).Get(), ref_lock.c_str(), 0); };
  Result<std::optional<std::string>> ref_now = HostRef(host_git_fd, name);
  if (!ref_now || *ref_now != ref || ReadHostLogEnd(host_git_fd, log) != end) {
    unlock_ref();
    return Appended::kBusy;
  }
  std::string leaf;
  Result<std::optional<UniqueFd>> parent = ParentDir(host_git_fd, log, true, leaf, owner);
  if (!parent || !*parent) {
    unlock_ref();
    done.refused.push_back(log + ": " + (parent ? "no directory" : parent.error().message));
    return Appended::kNot;
  }
  ::unlinkat((**parent).Get(), leaf.c_str(), AT_REMOVEDIR);  // an empty directory in its place
  struct stat before {};
  const bool existed = ::fstatat((**parent).Get(), leaf.c_str(), &before, AT_SYMLINK_NOFOLLOW) == 0;
  // One component beneath a directory opened without links, O_NOFOLLOW: no link is followed.
  UniqueFd out(::openat((**parent).Get(), leaf.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
  struct stat st {};
  if (!out || ::fstat(out.Get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    unlock_ref();
    done.refused.push_back(log + ": the host's log is not a regular file; nothing appended");
    return Appended::kNot;
  }
  if (!existed) (void)Chown(out.Get(), owner, log);
  Result<void> wrote = WriteAll(out.Get(), text, log);
  unlock_ref();
  if (!wrote) {
    done.refused.push_back(log + ": " + wrote.error().message);
    return Appended::kWriteFailed;
  }
  return Appended::kDone;
}

// Where a stash log the session's `git stash drop` rewrote goes on: the end of its last line (in
// `head`, its first part) whose stash the host's log has or the copy-back took last; 0 when none.
size_t AfterLastStashTaken(std::string_view head, const GitSnapshot::ReflogTaken& taken,
                           int host_git_fd) {
  const std::set<std::string, std::less<>> host = HostStashes(host_git_fd);
  const std::string_view last = taken.last.empty() ? "" : IdsOf(taken.last).new_id;
  size_t after = 0;
  size_t start = 0;
  for (size_t end; (end = head.find('\n', start)) != std::string_view::npos; start = end + 1) {
    const std::string_view line = head.substr(start, end - start);
    if (!ValidReflogLine(line)) break;
    const std::string_view id = IdsOf(line).new_id;
    if (host.contains(id) || id == last) after = end + 1;
  }
  return after;
}

// The lines the session's git appended to its private reflog of `name` that tell a move the
// copy-back made (`written`: the value it wrote now), appended to the host's `logs/<name>` under
// the ref's lock (as git appends), and only as a continuation of the host's log up to that value
// while the host's ref holds it: the first line taken is the first whose old value continues the
// host's log (HostLogEnd), each next one's old value the new value of the one before, and the last
// the last whose new value is the value written. Lines before the first are dropped (the person
// moved the ref since: their lines stay the newest, outside review 32); lines the session wrote
// after the move wait for the ref's next move (a move refused or never made on the host never
// lands its line, nor does a line of a ref that does not move: outside reviews 32 and 33); lines
// past kReflogLinesChecked or kReflogBytesPerCopyBack (`budget`) come at the next copy-back, and
// a run longer than one read without the value is passed over. Each line appended is well formed
// (ValidReflogLine), names objects the host has, and its new value passes CheckTip (`git stash
// pop` of an older stash reaches it): the first that does not stops the copy of that log (refused,
// with a line). A ref the host lacks takes no line (its log would be made anew, outside review
// 31). Appended with O_APPEND beneath the host's .git without links. Returns whether lines of the
// move wait.
bool CopyBackReflog(int private_fd, int host_git_fd, const std::string& name, GitSnapshot& snapshot,
                    const std::optional<GitOwner>& owner, GitCopyBack& done,
                    const std::string* written, uint64_t& budget) {
  const std::string log = "logs/" + name;
  Result<std::optional<std::string>> host_ref = HostRef(host_git_fd, name);
  if (!host_ref || !*host_ref) return false;
  const HostLogEnd host_end = ReadHostLogEnd(host_git_fd, log);
  Result<std::optional<OpenedFile>> file = OpenRegular(private_fd, log, 16u << 20, true);
  if (!file) {
    done.refused.push_back(log + ": " + file.error().message);
    return false;
  }
  if (!*file) return false;
  struct stat mine {};
  if (::fstat((*file)->fd.Get(), &mine) != 0 || Sparse(mine)) {
    done.refused.push_back(log + ": a sparse file or unreadable; nothing appended");
    return false;
  }
  // Only what follows the part already taken, and a bounded part of it: each copy-back had read
  // every moved ref's whole log to skip the lines taken before (16 MiB each, sparse at no cost to
  // the session: 2 GiB per copy-back for 128 branches, outside review 28).
  GitSnapshot::ReflogTaken& taken = snapshot.reflog_taken[name];
  const std::string key = FileKey((*file)->fd.Get(), "");
  if (!taken.file.empty() && key != taken.file && taken.bytes != 0) {
    // Another file: where the last line taken stands in its first part, on from there; a log
    // that starts with the branch's making (a null old id) and lacks it, from its start; else
    // nothing (a rewritten log whose part taken is not found: appending it again would repeat it).
    std::string head(std::min<uint64_t>((*file)->size, kReflogReadMax), '\0');
    const ssize_t n = ::pread((*file)->fd.Get(), head.data(), head.size(), 0);
    head.resize(n > 0 ? static_cast<size_t>(n) : 0);
    const std::string last = taken.last + "\n";
    const size_t at = head.starts_with(last) ? 0 : head.find("\n" + last);
    const size_t space = head.find(' ');
    const bool made_anew = (space == 40 || space == 64) && head.find_first_not_of('0') == space;
    if (!taken.last.empty() && at != std::string::npos) {
      taken.bytes = at == 0 ? last.size() : at + 1 + last.size();
    } else if (made_anew && !(name == "refs/stash" && head.starts_with(taken.first + "\n"))) {
      taken = GitSnapshot::ReflogTaken{};
    } else if (size_t after =
                   name == "refs/stash" ? AfterLastStashTaken(head, taken, host_git_fd) : 0;
               after != 0) {
      taken.bytes = after;  // a stash dropped: on from the last one the host has or took
    } else {
      taken.file = key;
      taken.bytes = (*file)->size;  // nothing of this file comes back
      done.refused.push_back(log +
                             ": the session's log was made anew without the lines already "
                             "copied (a stash dropped, a reflog expired); nothing of it is "
                             "appended");
      return false;
    }
  }
  taken.file = key;
  // A move the copy-back made now: the session's lines so far tell it, up to the value written;
  // those after wait for the ref's next move (a move refused, or never made on the host, never
  // lands its line: outside reviews 32 and 33).
  if (written != nullptr) {
    taken.until = (*file)->size;
    taken.to = *written;
  }
  const uint64_t until = std::min<uint64_t>(taken.until, (*file)->size);
  if (until <= taken.bytes) return false;
  if (snapshot.reflog_bytes >= kReflogBytesPerSession) {
    taken.until = taken.bytes;
    done.refused.push_back(log + ": the session's lines passed " +
                           std::to_string(kReflogBytesPerSession >> 20) +
                           " MiB appended to the host's logs; no more are appended");
    return false;
  }
  std::string text(std::min<uint64_t>(until - taken.bytes + 1, kReflogReadMax), '\0');
  const uint64_t from = taken.bytes == 0 ? 0 : taken.bytes - 1;  // with the newline before
  const ssize_t got =
      ::pread((*file)->fd.Get(), text.data(), text.size(), static_cast<off_t>(from));
  if (got <= 0) return false;
  text.resize(static_cast<size_t>(got));
  std::string_view rest(text);
  if (taken.bytes != 0) {
    if (rest.front() != '\n') {
      done.refused.push_back(log +
                             ": the session rewrote the part already copied; nothing more "
                             "is appended");
      return false;
    }
    rest.remove_prefix(1);
  }
  // The whole lines read, up to the first malformed one.
  std::vector<std::string_view> lines;
  bool malformed = false;
  for (size_t end; (end = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(end + 1)) {
    const std::string_view line = rest.substr(0, end);
    const size_t index = taken.lines + lines.size() + 1;
    if (!ValidReflogLine(line)) {
      done.refused.push_back(log + ": line " + std::to_string(index) +
                             " is malformed; it and the lines after it are not copied");
      malformed = true;
      break;
    }
    // git appends a line per value a ref takes; a null new value is never one (a deleted ref
    // loses its log), and it made the person's `stash@{0}` the null id (outside review 10).
    if (IdsOf(line).new_id.find_first_not_of('0') == std::string_view::npos) {
      done.refused.push_back(log + ": line " + std::to_string(index) +
                             " names no object as the ref's new value; it and the lines after "
                             "it are not copied");
      malformed = true;
      break;
    }
    lines.push_back(line);
  }
  // More bytes than one read (kReflogReadMax) of the move's follow the lines read.
  const bool cut = !malformed && from + static_cast<uint64_t>(got) < until;
  GitSnapshot::ReflogTaken next = taken;  // what this copy-back takes
  auto take = [&](std::string_view line) {
    next.bytes += line.size() + 1;
    if (next.lines++ == 0) next.first = line;
    next.last = line;
  };
  // A line continues the host's log (HostLogEnd), or the session's run passed over from the same
  // end of it; a stash line any stash the host keeps (git's `stash drop` takes one from the middle,
  // and the session's next stash follows the one before the dropped).
  const bool gap = !taken.gap_to.empty() && taken.gap_host == host_end.Key();
  std::optional<std::set<std::string, std::less<>>> stashes;
  auto continues = [&](std::string_view old_id) {
    if (host_end.ContinuedBy(old_id) || (gap && old_id == taken.gap_to)) return true;
    if (name != "refs/stash" || host_end.kind == HostLogEnd::Kind::kUnreadable) return false;
    if (!stashes) stashes = HostStashes(host_git_fd);
    return stashes->contains(old_id);
  };
  // The runs: from a line that continues the host's log, while each line follows the one before.
  // The first run that reaches the host's ref's value is appended up to its last line that does;
  // a run that ends before more lines without reaching it (the session's branch deleted and made
  // again, a move that never came back) is dropped, as is every line that starts none.
  size_t first = 0;
  size_t end = 0;
  size_t last = lines.size();  // the last line of the run whose new value the host's ref holds
  for (;;) {
    while (first < lines.size() && !continues(IdsOf(lines[first]).old_id)) ++first;
    end = first < lines.size() ? first + 1 : first;
    while (end < lines.size() && IdsOf(lines[end]).old_id == IdsOf(lines[end - 1]).new_id) ++end;
    for (size_t i = first; i < end && **host_ref == taken.to; ++i) {
      if (IdsOf(lines[i]).new_id == taken.to) last = i;
    }
    if (last != lines.size() || end == lines.size()) break;
    first = end;  // a run that ended without the ref's value, lines after it: dropped
  }
  for (size_t i = 0; i < first; ++i) take(lines[i]);
  if (first > 0) {
    done.conflicts.push_back(log + ": " + std::to_string(first) +
                             " of the session's lines do not continue the host's log up to its "
                             "ref (the ref moved on the host, or the move did not come back); "
                             "not appended");
  }
  if (last == lines.size()) {
    if (first < end && cut) {
      // A run longer than one read without the host's value: passed over, the host's log continued
      // from its end by what follows it.
      for (size_t i = first; i < end; ++i) take(lines[i]);
      next.gap_host = host_end.Key();
      next.gap_to = std::string(IdsOf(lines[end - 1]).new_id);
      done.conflicts.push_back(log + ": " + std::to_string(end - first) +
                               " lines passed over (more than " +
                               std::to_string(kReflogReadMax >> 10) +
                               " KiB of them since the last copy-back); not appended");
      taken = next;
      return true;
    }
    // No run reaches the value written (the person moved the ref since, or the session's lines
    // never lead there): the rest waits for the ref's next move.
    taken = next;
    taken.until = taken.bytes;
    return false;
  }
  // Lines [first, last], each checked, a bounded number and size per copy-back (the rest wait);
  // those after `last` wait for the ref's next move.
  bool waiting = false;
  bool refused = false;
  std::string append;
  size_t checked = 0;
  // A line that tells no move (its old and new values the same; `git reset --hard HEAD` writes
  // one) is taken but not appended, nor a stash line naming a stash the host's log or this append
  // has already: a session's padding had landed 42 such lines in a branch's log, and one stash six
  // times in the person's `git stash list`; a stash drop had a stash come back twice (outside
  // review 34).
  const bool stash = name == "refs/stash";
  if (stash && !stashes) stashes = HostStashes(host_git_fd);
  std::set<std::string_view> appended;
  for (size_t i = first; i <= last; ++i) {
    const std::string_view line = lines[i];
    const std::string index = std::to_string(next.lines + 1);
    const ReflogIds ids = IdsOf(line);
    if (ids.old_id == ids.new_id ||
        (stash && (stashes->contains(ids.new_id) || appended.contains(ids.new_id)))) {
      take(line);
      continue;
    }
    auto has = [&](std::string_view id) {
      return id.find_first_not_of('0') == std::string_view::npos ||
             HostHasObject(host_git_fd, std::string(id)).value_or(false);
    };
    if (!has(ids.old_id) || !has(ids.new_id)) {
      done.refused.push_back(log + ": line " + index +
                             " names an object the host does not have; it and the lines after "
                             "it are not copied");
      refused = true;
      break;
    }
    if (checked == kReflogLinesChecked || append.size() + line.size() + 1 > budget) {
      waiting = true;
      break;
    }
    ++checked;
    const TipCheck check =
        CheckTip(host_git_fd, std::string(ids.new_id),
                 name == "refs/stash" || name.starts_with("refs/heads/"), snapshot);
    if (check.verdict == TipCheck::Verdict::kLater) {
      waiting = true;
      break;
    }
    if (check.verdict == TipCheck::Verdict::kRefuse) {
      done.refused.push_back(log + ": line " + index + ": " + check.why +
                             "; it and the lines after it are not copied");
      refused = true;
      break;
    }
    append.append(line).push_back('\n');
    appended.insert(ids.new_id);
    take(line);
  }
  if (stash) {
    for (std::string_view id : appended) {
      if (snapshot.stashes_seen.size() < kRefusedTipsRemembered) snapshot.stashes_seen.emplace(id);
    }
  }
  if (refused) waiting = false;
  // All of the run up to the value written has come (or is refused): what follows waits for the
  // ref's next move.
  auto settle = [&] {
    if (!waiting) next.until = next.bytes;
    taken = next;
  };
  if (append.empty()) {
    settle();
    return waiting;
  }
  const Appended outcome =
      AppendToHostLog(host_git_fd, name, **host_ref, host_end, append, owner, done);
  if (outcome == Appended::kBusy) return true;
  if (outcome == Appended::kNot) return false;
  next.gap_host.clear();
  next.gap_to.clear();
  settle();
  budget -= std::min<uint64_t>(budget, append.size());
  snapshot.reflog_bytes += append.size();
  if (outcome == Appended::kWriteFailed) return false;
  done.reflog_lines += static_cast<size_t>(std::count(append.begin(), append.end(), '\n'));
  return waiting;
}

// The person's stash@{0} is their stash log's last line, and `git stash pop` drops it: once the
// copy-back wrote refs/stash and no line of the session's landed for it (the session's log
// rewritten by drops on both sides, outside review 35: refs/stash named a stash the list lacked,
// and the person's next pop lost it), the session's line for that stash is appended with its old
// value the host's log's end, as `git stash drop --rewrite` adjusts one.
void EnsureStashTop(int private_fd, int host_git_fd, const std::string& value,
                    const std::optional<GitOwner>& owner, GitCopyBack& done) {
  const std::string log = "logs/refs/stash";
  Result<std::optional<std::string>> host_ref = HostRef(host_git_fd, "refs/stash");
  if (!host_ref || *host_ref != value) return;
  const HostLogEnd end = ReadHostLogEnd(host_git_fd, log);
  if (end.kind == HostLogEnd::Kind::kUnreadable || HostStashes(host_git_fd).contains(value)) return;
  Result<std::optional<OpenedFile>> file = OpenRegular(private_fd, log, 16u << 20, true);
  if (!file || !*file) return;
  std::optional<std::string> tail = ReadTail(**file, kReflogReadMax);
  if (!tail) return;
  std::string_view rest(*tail);
  if (tail->size() < (*file)->size) rest.remove_prefix(std::min(rest.size(), rest.find('\n') + 1));
  std::string_view found;
  for (size_t eol; (eol = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(eol + 1)) {
    const std::string_view line = rest.substr(0, eol);
    if (ValidReflogLine(line) && IdsOf(line).new_id == value) found = line;
  }
  if (found.empty()) return;
  const size_t id = found.find(' ');
  const std::string line = (end.kind == HostLogEnd::Kind::kLine ? end.last : std::string(id, '0')) +
                           std::string(found.substr(id));
  if (!ValidReflogLine(line)) return;
  if (AppendToHostLog(host_git_fd, "refs/stash", value, end, line + "\n", owner, done) ==
      Appended::kDone) {
    ++done.reflog_lines;
  }
}

}  // namespace

Result<GitCopyBack> CopyBackPrivateGit(int private_fd, int host_git_fd, GitSnapshot& snapshot) {
  GitCopyBack done;
  snapshot.tip_checks_until = std::chrono::steady_clock::now() + kGitTipChecksPerCopyBack;
  const size_t tip_checks_before = snapshot.tip_checks;
  snapshot.tips_passed.clear();
  // A root daemon writes as root: what it makes belongs to the .git's owner, so that the
  // person's own git can go on writing there.
  std::optional<GitOwner> owner;
  if (::geteuid() == 0) {
    struct stat st {};
    if (::fstat(host_git_fd, &st) != 0) return std::unexpected(Errno("fstat", ".git"));
    owner = GitOwner{st.st_uid, st.st_gid};
  }
  ForgetMovedWorktrees(host_git_fd, snapshot);
  // Objects first: a ref is written only once what it names is there.
  Result<size_t> objects = CopyBackObjects(private_fd, host_git_fd, snapshot, done.refused, owner);
  if (!objects) return Propagate(objects);
  done.objects = *objects;
  PackedRefsScope packed_refs;           // the host's packed-refs parsed once per version
  std::vector<std::string> moved;        // refs written to the host now: their reflogs follow
  std::vector<std::string> checked_out;  // deletions and moves waiting for HEAD's copy-back
  HostIndexLocks locks(owner);
  // The session's HEADs and refs, read once (SessionView); its read's refusals said once.
  Result<SessionView> session = ReadSession(private_fd, snapshot);
  if (!session) return Propagate(session);
  done.refused.Append(session->refs_refused);
  if (Result<void> refs = CopyBackRefs(private_fd, host_git_fd, *session, snapshot, locks, owner,
                                       done, moved, &checked_out);
      !refs) {
    return Propagate(refs);
  }
  const auto [head, index] = CopyBackHeadAndIndex(
      private_fd, host_git_fd, host_git_fd, StateOf(snapshot.head, snapshot.index, "", *session),
      snapshot, locks, owner, done);
  done.head = head;
  done.index = index || done.index;  // written already, perhaps, with a branch (CopyBackRefs)
  CopyBackWorktrees(private_fd, host_git_fd, *session, snapshot, locks, owner, done);
  if (!checked_out.empty()) {
    const std::set<std::string> only(checked_out.begin(), checked_out.end());
    if (Result<void> refs = CopyBackRefs(private_fd, host_git_fd, *session, snapshot, locks, owner,
                                         done, moved, nullptr, &only);
        !refs) {
      return Propagate(refs);
    }
  }
  // Not HEAD's log: git reads its messages (`checkout: moving from X to Y`) to find where
  // `git checkout -` goes, and X is the session's text.
  // The moved refs' logs, then those with lines left by an earlier copy-back (the 32 lines'
  // cap, a tip check's time): a branch that then holds still had its last lines never come back
  // (outside review 30). At most kRefsWrittenPerCopyBack logs per copy-back.
  std::vector<std::string> logs = moved;
  for (const std::string& name : snapshot.reflog_pending) {
    if (std::find(moved.begin(), moved.end(), name) == moved.end()) logs.push_back(name);
  }
  uint64_t reflog_budget = kReflogBytesPerCopyBack;
  for (size_t i = 0; i < logs.size() && i < kRefsWrittenPerCopyBack; ++i) {
    // Moved now: the value written, which the log's lines lead to.
    const std::string* written = nullptr;
    if (i < moved.size()) {
      auto it = snapshot.refs.find(logs[i]);
      if (it != snapshot.refs.end()) written = &it->second;
    }
    if (CopyBackReflog(private_fd, host_git_fd, logs[i], snapshot, owner, done, written,
                       reflog_budget)) {
      snapshot.reflog_pending.insert(logs[i]);
    } else {
      snapshot.reflog_pending.erase(logs[i]);
      if (written != nullptr && logs[i] == "refs/stash") {
        EnsureStashTop(private_fd, host_git_fd, *written, owner, done);
      }
    }
  }
  done.tip_checks = snapshot.tip_checks - tip_checks_before;
  // Once per session and line, the first kGitLoggedLinesMax; past them (a session making ever new
  // names) one line per copy-back counts the new ones, with those the report only counted: every
  // line had been logged again at every copy-back, 200,000 per send (outside review 26).
  constexpr size_t kGitLoggedLinesMax = 1024;
  size_t unlogged = done.refused.dropped() + done.conflicts.dropped();
  auto log_once = [&](const std::string& line) {
    if (snapshot.logged.contains(line)) return;
    if (snapshot.logged.size() >= kGitLoggedLinesMax) {
      ++unlogged;
      return;
    }
    snapshot.logged.insert(line);
    LogWarn(line);
  };
  for (const std::string& line : done.refused) log_once("git copy-back refused " + line);
  for (const std::string& line : done.conflicts) log_once("git copy-back left " + line);
  if (unlogged > 0) {
    LogWarn("git copy-back refused or left " + std::to_string(unlogged) +
            " more entries, not logged line by line (this session's first " +
            std::to_string(kGitLoggedLinesMax) + " lines were)");
  }
  return done;
}

}  // namespace ptybox::sandbox
