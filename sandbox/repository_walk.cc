// A breadth-first walk with one directory open at a time: each directory is opened with openat2
// beneath the root's descriptor (no links, no other mount), so neither a link nor a rename
// elsewhere can lead the walk outside the root.
#include "sandbox/repository_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/proc_stat.h"
#include "common/unique_fd.h"
#include "common/untrusted_text.h"
#include "sandbox/git_private.h"
#include "sandbox/mount_plan.h"
#include "sandbox/tree_watch.h"

namespace ptybox::sandbox {
namespace {

// Watch instances are counted per user too (inotify's fs.inotify.max_user_instances and
// fanotify's fs.fanotify.max_user_groups, 128 by default each, shared with every other program
// of that user), and each check after a launch holds one for its walk (sandbox/tree_watch.h).
// Concurrent opens (256 at once) would run out and refuse their launches: the checks hold at most a
// quarter of the instances at once, and a check beyond that waits on its own thread for a slot
// (never on the reactor), then walks as any other.
class InstanceSlots final {
 public:
  InstanceSlots() : free_(WatchInstanceBudget()) {}
  void Acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [this] { return free_ > 0; });
    --free_;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  size_t free_;
};

InstanceSlots& WatchInstances() {
  // Never destroyed: a watch ended in the background (EndWatch) may give its slot back while
  // the process exits.
  static InstanceSlots* const slots = new InstanceSlots();
  return *slots;
}

// Ends a check's watch and gives its slot back. A fanotify group (a root daemon's watch) is
// closed off the calling thread: closing it waits in the kernel for its marks to be destroyed
// (an SRCU grace period, fsnotify_destroy_group: 6 ms on this project's 2-core VM), which every
// workspace-write open, a claimed pooled shell's included, waited for before its answer. The
// slot comes back only once the descriptor is closed, so the groups the checks hold stay within
// the budget. An inotify instance is closed here: its watches count against a budget that
// refuses (never waits), and the next check must find them given back (outside review 14). On
// any failure to start the thread the watch is closed here too.
std::atomic<bool> g_end_in_helper{false};

// Closes the watch's fanotify group in a child process started like fork but with no exit signal
// (no reaper of this process waits for it), which holds the last reference: its close, not
// ours, waits for the grace period. The child closes every other descriptor it was given at
// once (a pipe of the caller's, run's output, must not stay open past the caller's exit), then
// waits until this process has let go of the group (end of file on `gate`) and closes it. Only
// raw system calls in the child: a copy of a threaded process. False when no child could be
// started (the caller then closes it as before).
bool CloseInHelperProcess(TreeWatch& watch) {
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return false;
  const int fd = watch.fd();
  struct clone_args args {};
  args.exit_signal = 0;
  const auto pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  if (pid == 0) {
    const unsigned lo = static_cast<unsigned>(std::min(fd, gate[0]));
    const unsigned hi = static_cast<unsigned>(std::max(fd, gate[0]));
    if (lo > 0) ::syscall(SYS_close_range, 0U, lo - 1, 0U);
    if (hi > lo + 1) ::syscall(SYS_close_range, lo + 1, hi - 1, 0U);
    ::syscall(SYS_close_range, hi + 1, ~0U, 0U);
    char ignored = 0;
    (void)::syscall(SYS_read, gate[0], &ignored, 1);
    ::syscall(SYS_close, fd);
    ::syscall(SYS_exit_group, 0);
  }
  ::close(gate[0]);
  if (pid < 0) {
    ::close(gate[1]);
    return false;
  }
  {
    TreeWatch ending(std::move(watch));  // our reference goes here, quickly: the child holds one
  }
  ::close(gate[1]);
  return true;
}

void EndWatch(std::optional<TreeWatch> watch) {
  if (watch && watch->kind() == TreeWatch::Kind::kFanotify && g_end_in_helper.load() &&
      CloseInHelperProcess(*watch)) {
    WatchInstances().Release();
    return;
  }
  if (watch && watch->kind() == TreeWatch::Kind::kFanotify) {
    try {
      auto ending = std::make_unique<TreeWatch>(std::move(*watch));
      std::thread([ending = std::move(ending)]() mutable {
        ending.reset();
        WatchInstances().Release();
      }).detach();
      return;
    } catch (...) {
      // No thread (or no memory for one): what was moved is closed with the lambda.
    }
  }
  watch.reset();
  WatchInstances().Release();
}

constexpr uint64_t kBeneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

std::string Refusal(const std::filesystem::path& root, const std::string& why) {
  return "the writable root " + root.string() + " could not be searched whole for repositories (" +
         why +
         "). ptybox protects the .git of every repository in a writable root and starts no "
         "session in one it cannot search whole: make a smaller directory the workspace or "
         "writable root, or open the session read-only";
}

// Why a directory that could not be opened leaves the walk incomplete, or nullopt when what
// happened cannot hide a repository from the session (it is gone, or became a link or another
// mount, which the session's view never enters through this root either).
std::optional<std::string> OpenFailure(int error, int parent, const char* name,
                                       const std::filesystem::path& root,
                                       const std::filesystem::path& relative, uid_t owner) {
  const std::filesystem::path where = root / relative;
  if (error == ENAMETOOLONG) {
    // Too long to print usefully: where it starts and how long it is.
    const std::string first = relative.begin()->string();
    return "a directory nested deeper than the kernel resolves a path (" +
           std::to_string(where.string().size()) + " bytes) under " +
           (root / first.substr(0, 64)).string();
  }
  if (error == EXDEV && ::geteuid() != 0) {
    // A root daemon's idmapped roots leave other mounts out; an ordinary user's bind shows them.
    return "another mount inside it, at " + where.string() +
           ", which a session sees and writes but the walk does not cross: unmount it";
  }
  if (error != EACCES && error != EPERM) return std::nullopt;
  struct stat st {};
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  if (st.st_uid == owner) {
    return where.string() +
           " cannot be read, and a session (its owner) could make it readable: chmod u+rx it";
  }
  if ((st.st_mode & (S_IXGRP | S_IXOTH)) != 0) {
    return where.string() +
           " cannot be listed but can be entered (searchable without read): make it readable "
           "or not searchable (chmod o-x,g-x)";
  }
  return std::nullopt;  // neither readable nor searchable: the session cannot reach into it
}

// What reading a repository's file for the launch found.
struct ReadFile {
  enum class Status { kNone, kRead, kTooLarge } status = Status::kNone;
  std::string bytes;
};

ReadFile ReadOpened(int fd, std::string_view magic, size_t max, size_t& budget);

// The regular file at `path` (relative to `dirfd`), read whole when it starts with `magic`: typed
// before it is opened for reading (never a FIFO or a device a link may name), read with read(2)
// (a mapping of a file a session truncates meanwhile would end the daemon with SIGBUS). kTooLarge
// past `max` bytes; `budget` (what the launch may still read) is charged what was read.
ReadFile ReadRepositoryFile(int dirfd, const char* path, int extra_flags, std::string_view magic,
                            size_t max, size_t& budget) {
  ReadFile file;
  // The type first, on a descriptor that opens nothing (O_PATH): a device a link names is never
  // opened (opening some has effects: a watchdog starts, a tape rewinds).
  const UniqueFd where(::openat(dirfd, path, O_PATH | O_CLOEXEC | extra_flags));
  struct stat st {};
  if (!where || ::fstat(where.Get(), &st) != 0 || !S_ISREG(st.st_mode)) return file;
  // Re-opened for reading through its descriptor: the same inode, whatever the path names now.
  const std::string self = "/proc/self/fd/" + std::to_string(where.Get());
  const UniqueFd fd(::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd || ::fstat(fd.Get(), &st) != 0 || !S_ISREG(st.st_mode)) return file;
  return ReadOpened(fd.Get(), magic, max, budget);
}

// ReadRepositoryFile's reading, of a regular file opened for it.
ReadFile ReadOpened(int fd, std::string_view magic, size_t max, size_t& budget) {
  ReadFile file;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const auto got = static_cast<size_t>(n);
    if (file.bytes.size() + got > max || got > budget) {
      file.status = ReadFile::Status::kTooLarge;
      return file;
    }
    budget -= got;
    file.bytes.append(buffer, got);
    if (file.bytes.size() >= magic.size() && !file.bytes.starts_with(magic)) return ReadFile{};
  }
  if (!file.bytes.starts_with(magic)) return ReadFile{};
  file.status = ReadFile::Status::kRead;
  return file;
}

// The git directory a `.git` entry stands for: the directory itself, or the one a gitfile
// (`gitdir: <path>`, relative to the worktree) names. Empty when it names none.
std::filesystem::path GitDirectoryOf(const std::filesystem::path& git_path, int worktree_fd,
                                     size_t& budget) {
  struct stat st {};
  if (::fstatat(worktree_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) != 0) return {};
  if (S_ISDIR(st.st_mode)) return git_path;
  ReadFile file = ReadRepositoryFile(worktree_fd, ".git", O_NOFOLLOW, "gitdir: ", 4096, budget);
  if (file.status != ReadFile::Status::kRead) return {};
  std::string text = file.bytes.substr(8);
  text = text.substr(0, text.find_first_of("\r\n"));
  if (text.empty()) return {};
  const std::filesystem::path named(text);
  return named.is_absolute() ? named : git_path.parent_path() / named;
}

// The gitlinks of the index of the git directory `git_dir` (and of a split index's shared part),
// as the host's git reads them there: none when there is no index git could read. An error when
// an index is larger than the launch may read.
struct Gitlinks {
  std::vector<std::string> paths;
  bool private_index = false;  // read from an index the session's user may not read
};
Result<Gitlinks> GitlinksOf(const std::filesystem::path& git_dir, size_t& budget) {
  Gitlinks found;
  std::vector<std::string>& paths = found.paths;
  for (std::string name = "index"; !name.empty();) {
    const std::filesystem::path path = git_dir / name;
    name.clear();
    ReadFile file =
        ReadRepositoryFile(AT_FDCWD, path.c_str(), O_NOFOLLOW, "DIRC", kGitIndexMax, budget);
    if (file.status == ReadFile::Status::kTooLarge) {
      return Fail(ErrorKind::kPolicyDenied,
                  "the index " + Printable(path.string(), 200) +
                      " is larger than a launch reads (" + std::to_string(kGitIndexMax >> 20) +
                      " MiB per index, " + std::to_string(kSubmoduleIndexBudget >> 20) +
                      " MiB for all); ptybox reads each repository's index for its submodules "
                      "and starts no session it cannot read them for: make a smaller directory "
                      "the workspace, or open the session read-only",
                  path.string());
    }
    if (file.status != ReadFile::Status::kRead) break;
    std::string why;
    std::optional<IndexGitlinks> links = GitlinksOfIndex(file.bytes, why);
    if (!links) break;
    paths.insert(paths.end(), links->paths.begin(), links->paths.end());
    // A split index: its shared part holds the other entries (read once: a shared index has no
    // link of its own).
    if (!links->shared_index.empty() && path.filename() == "index") {
      name = "sharedindex." + links->shared_index;
    }
  }
  return found;
}

// Whether `path` is one of `roots` or lies beneath one (lexically, both absolute and normal).
bool InsideAnyRoot(const std::filesystem::path& path,
                   const std::vector<std::filesystem::path>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::filesystem::path& root) {
    const std::filesystem::path rel =
        path.lexically_normal().lexically_relative(root.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
  });
}

// A path git may check out in a worktree: relative, no empty, `.` or `..` component, none that
// is `.git` in any case.
bool IsWorktreePath(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.size() > 4096) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (part.size() == 4 && (part[0] == '.') && (part[1] | 0x20) == 'g' &&
        (part[2] | 0x20) == 'i' && (part[3] | 0x20) == 't') {
      return false;
    }
    start = slash + 1;
  }
  return true;
}

constexpr uint64_t kBeneathAnyMount = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// Whether `dir` is a git directory: a HEAD file beside objects/ and refs/ (a `.git`, a bare
// repository, a `repo`-tool project's store).
bool LooksLikeGitDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / "HEAD", ec) &&
         std::filesystem::is_directory(dir / "objects", ec) &&
         std::filesystem::is_directory(dir / "refs", ec);
}

// Whether `uid` may read and search the directory `path` (links resolved) and search every
// directory above it, by their mode bits and the user's groups in the password database. A
// directory that is not there holds nothing to read.
bool UserMayRead(const std::filesystem::path& path, uid_t uid) {
  if (uid == 0) return true;
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return true;
  std::vector<gid_t> groups;
  {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16 * 1024);
    // A uid with no account (a container's, a removed user's) has no groups: its own bits and
    // everyone's decide.
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
      int count = 256;
      groups.resize(static_cast<size_t>(count));
      if (::getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) < 0) return false;
      groups.resize(static_cast<size_t>(count));
    }
  }
  bool last = true;
  for (std::filesystem::path at = real;; at = at.parent_path()) {
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0) return false;
    const bool in_group = std::find(groups.begin(), groups.end(), st.st_gid) != groups.end();
    const mode_t read = st.st_uid == uid ? S_IRUSR : in_group ? S_IRGRP : S_IROTH;
    const mode_t search = st.st_uid == uid ? S_IXUSR : in_group ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & search) == 0 || (last && (st.st_mode & read) == 0)) return false;
    last = false;
    if (at == at.parent_path()) return true;
  }
}

// Each gitlink of each repository of `gits` that lies inside a writable root: the host's git
// enters that directory (`git status` runs git there) when it holds a `.git`. One with a `.git`
// is a repository of the walk; one without must be a directory the session cannot write into
// (protected: `submodule_dirs`); one that is missing, not a directory or reached through a link
// could become such a repository, made by the session, and refuses the launch.
std::optional<std::string> CollectSubmoduleDirs(const std::vector<std::filesystem::path>& roots,
                                                const std::vector<std::filesystem::path>& git_paths,
                                                const std::vector<std::filesystem::path>& git_links,
                                                std::vector<std::filesystem::path>& submodule_dirs,
                                                std::vector<std::filesystem::path>& gitlink_dirs,
                                                std::optional<uid_t> owner, size_t look_budget) {
  std::vector<std::filesystem::path> normal_roots;
  for (const std::filesystem::path& r : roots) normal_roots.push_back(r.lexically_normal());
  std::vector<std::optional<OpenedPath>> opened(roots.size());
  // The root holding `path` (or equal to it), opened once; nullopt when there is none.
  auto holding = [&](const std::filesystem::path& path,
                     std::filesystem::path& relative) -> std::optional<int> {
    for (size_t r = 0; r < normal_roots.size(); ++r) {
      if (path != normal_roots[r] && HoldingRoot({normal_roots[r]}, path, relative) < 0) continue;
      if (path == normal_roots[r]) relative = ".";
      if (!opened[r]) {
        Result<OpenedPath> root_fd = OpenRootNoFollow(normal_roots[r]);
        if (!root_fd) return std::nullopt;  // the launch refuses the root with its own message
        opened[r] = std::move(*root_fd);
      }
      return opened[r]->fd.Get();
    }
    return std::nullopt;
  };
  size_t budget = kSubmoduleIndexBudget;
  size_t pins = 0;
  // A directory the host's git follows from a protected repository by its path (a gitfile's git
  // directory, a linked worktree's common directory, an alternate object directory, a link in a
  // .git): one inside a writable root is the session's to replace unless it is kept. Inside a
  // repository's .git (read-only already), that repository's worktree is pinned with the
  // directories above it, so that no `mv` sets the .git aside for one the session made (outside
  // reviews 58 and 60: the person's git in the protected repository then took the session's
  // objects, or ran its config); anywhere else it is protected as a whole and pinned. Its path
  // and, links resolved, where it leads, both. One missing, not a directory or reached through a
  // link inside a root refuses the launch when `required` (`what` names it for the refusal).
  // The walk's .git paths, for finding the one a directory lies in by its ancestors.
  std::set<std::filesystem::path> git_set;
  for (const std::filesystem::path& g : git_paths) git_set.insert(g.lexically_normal());
  // The .git of the walk `path` is or lies in, found by its ancestors; empty when none.
  auto git_around = [&](const std::filesystem::path& path) -> std::filesystem::path {
    for (std::filesystem::path up = path; !up.empty(); up = up.parent_path()) {
      if (git_set.contains(up)) return up;
      if (up == up.parent_path()) break;
    }
    return {};
  };
  std::set<std::filesystem::path> kept_already;  // each directory judged once per launch
  // What a kept directory outside every .git must be: a git directory (a gitfile's or
  // `commondir`'s target, protected whole), an object directory (an alternate: it has `pack/` or
  // `info/`), or nothing (a link's target: refused, never silently made read-only; a session's
  // own repository linking to a source directory made it read-only in every later session,
  // outside review 64).
  enum class Kept { kGitDirectory, kObjects, kLinkTarget };
  // The git directory (LooksLikeGitDirectory) `dir` is or lies in, inside a writable root.
  auto git_dir_above =
      [&](const std::filesystem::path& dir) -> std::optional<std::filesystem::path> {
    std::filesystem::path relative;
    for (std::filesystem::path up = dir; holding(up, relative); up = up.parent_path()) {
      if (LooksLikeGitDirectory(up)) return up;
      if (relative == "." || up == up.parent_path()) break;
    }
    return std::nullopt;
  };
  auto keep = [&](const std::filesystem::path& path, bool required, const std::string& what,
                  Kept kind = Kept::kGitDirectory) -> std::optional<std::string> {
    std::error_code ec;
    // Resolved as the kernel resolves it, from the raw path: `..` after a link climbs from where
    // the link leads, which tidying the text first loses (outside review 63).
    const std::filesystem::path named = path.lexically_normal();
    const std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
    for (std::filesystem::path dir : {named, ec ? named : real.lexically_normal()}) {
      std::filesystem::path relative;
      if (kind == Kept::kLinkTarget) {
        // A link into a bare repository of the workspace (`repo`'s project stores,
        // git-new-workdir on a bare repository: outside review 65): that git directory is kept
        // whole, as a gitfile's target is.
        if (std::optional<std::filesystem::path> above = git_dir_above(dir)) {
          dir = *above;
          kind = Kept::kGitDirectory;
        }
      }
      const std::optional<int> root = holding(dir, relative);
      if (!root) continue;  // outside every writable root: read-only in the session
      if (!kept_already.insert(dir).second) continue;
      const std::filesystem::path in_git = git_around(dir);
      std::filesystem::path pinned = dir;
      if (!in_git.empty()) {
        pinned = in_git.parent_path();
        if (!holding(pinned, relative) || relative == ".") continue;  // a root is never moved
      } else {
        const UniqueFd opened_dir(OpenAt2(*root, relative.c_str(),
                                          O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                          kBeneathAnyMount));
        if (!opened_dir) {
          if (!required) continue;
          return what + " " + Printable(dir.string(), 300) +
                 ", inside a writable root, which is missing, not a directory or reached "
                 "through a link: a session could make it, and the host's git would take it as "
                 "the repository's";
        }
        struct stat sub {};
        const bool objects_like =
            ::fstatat(opened_dir.Get(), "pack", &sub, AT_SYMLINK_NOFOLLOW) == 0 ||
            ::fstatat(opened_dir.Get(), "info", &sub, AT_SYMLINK_NOFOLLOW) == 0;
        if (kind == Kept::kLinkTarget || (kind == Kept::kObjects && !objects_like)) {
          return what + " " + Printable(dir.string(), 300) +
                 ", a directory inside a writable root outside every repository's .git (" +
                 (kind == Kept::kObjects ? "and no object directory" : "a link's target") +
                 "), which a session could change; ptybox does not make such a directory "
                 "read-only unasked. Keep it inside a .git or outside the workspace, or remove "
                 "the repository if a session made it";
        }
        submodule_dirs.push_back(dir);
      }
      pins += std::distance(relative.begin(), relative.end());
      if (pins > kMaxSubmodulePins || gitlink_dirs.size() >= kMaxSubmoduleDirs) {
        return "the repositories in the writable roots lead git to too many directories to "
               "protect (submodules, borrowed objects, linked worktrees); make a smaller "
               "directory the workspace, or open the session read-only";
      }
      gitlink_dirs.push_back(pinned);
    }
    return std::nullopt;
  };
  // A git directory named by a gitfile or a link (`git_dir`, of the repository `worktree`): the
  // host's git reads its config and runs its hooks there (keep). One that is missing (or a link)
  // refuses the launch when the repository is a submodule (the host's git enters it on its own);
  // a plain repository's dangling gitfile is left, as any repository a session could make
  // ("Protected paths", "Remaining limits"). A linked worktree's lies in its main repository's
  // .git, whose worktree is pinned (outside review 60).
  auto protect_git_dir = [&](const std::filesystem::path& worktree,
                             const std::filesystem::path& git_dir) -> std::optional<std::string> {
    const bool submodule = std::find(gitlink_dirs.begin(), gitlink_dirs.end(),
                                     worktree.lexically_normal()) != gitlink_dirs.end();
    if (std::optional<std::string> refused = keep(
            git_dir, submodule,
            "the submodule " + Printable(worktree.string(), 300) + " has its git directory at")) {
      return *refused +
             ". Move it into the repository (git submodule absorbgitdirs, or replace a .git link "
             "with the directory), or open the session read-only";
    }
    return std::nullopt;
  };
  // The entries of git directories the launch looks at for links, all repositories together,
  // each directory once: a session's many gitfiles naming one directory of many links cost one
  // listing, not one per repository (outside review 62).
  const size_t kEntriesLooked = look_budget;  // kGitLookMaxEntries by default
  size_t looked = 0;
  std::set<std::filesystem::path> scanned;
  std::set<std::filesystem::path> followed;  // git directories protect_followed has judged
  // What else a repository's git directory `git_dir` (of `worktree`) leads git to by path: its
  // common directory (a linked worktree's `commondir`), the links among its own entries and its
  // common directory's (git's contrib `git-new-workdir` links config, objects, refs... to
  // another repository's), and the object directories borrowed through `objects/info/alternates`
  // (a `git clone --shared` or `--reference`, and the alternates of those, five levels as git
  // follows them, each relative line relative to its object directory, resolved). Each is kept
  // (keep). An alternates file that is a link, or a quoted line, refuses the launch.
  auto protect_followed = [&](const std::filesystem::path& worktree,
                              const std::filesystem::path& git_dir) -> std::optional<std::string> {
    // Each git directory once per launch, however many gitfiles or links name it.
    if (!followed.insert(git_dir.lexically_normal()).second) return std::nullopt;
    const std::string repository = Printable(worktree.string(), 200);
    const std::string read_only = ", or open the session read-only";
    // A root daemon reads here as root: nothing the workspace's owner may not read is looked
    // at for its session, nor reported in a refusal (outside review 64: a gitfile naming another
    // owner's .git, its entries counted through the look's bound).
    auto unreadable = [&](const std::filesystem::path& dir) {
      return ::geteuid() == 0 && owner && !UserMayRead(dir, *owner);
    };
    if (unreadable(git_dir)) {
      return "the repository " + repository +
             " has its git directory where the workspace's owner may not read" + read_only;
    }
    std::filesystem::path common = git_dir;
    {
      const std::filesystem::path file = git_dir / "commondir";
      ReadFile read = ReadRepositoryFile(AT_FDCWD, file.c_str(), O_NOFOLLOW, "", 4096, budget);
      if (read.status == ReadFile::Status::kRead) {
        std::string text = read.bytes.substr(0, read.bytes.find_first_of("\r\n"));
        if (!text.empty()) {
          const std::filesystem::path named(text);
          const std::filesystem::path raw = named.is_absolute() ? named : git_dir / named;
          // Resolved as git and the kernel resolve it (`..` after a link).
          std::error_code common_error;
          common = std::filesystem::weakly_canonical(raw, common_error);
          if (common_error) common = raw.lexically_normal();
          if (unreadable(common)) {
            return "the repository " + repository +
                   " has its common directory where the workspace's owner may not read" + read_only;
          }
          if (std::optional<std::string> refused = keep(
                  common, true, "the repository " + repository + " has its common directory at")) {
            return *refused + read_only;
          }
        }
      }
    }
    // Links anywhere in the git directories (a loose ref, `objects/pack`, `worktrees/<id>`, as
    // much as git-new-workdir's top-level ones: outside review 61), each kept where it leads. The
    // loose objects' own directories are listed only for their links' sake at their top
    // (`objects/xx` itself), not entered: a repository may hold a million loose objects.
    for (const std::filesystem::path& top : {git_dir, common}) {
      if (!scanned.insert(top.lexically_normal()).second) continue;
      std::error_code ec;
      std::filesystem::recursive_directory_iterator it(top, ec);
      for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (++looked > kEntriesLooked) {
          return "the git directories of the repositories in the writable roots hold more "
                 "entries than a launch looks at (" +
                 std::to_string(kEntriesLooked) + ", the last in " + Printable(top.string(), 300) +
                 "; `git gc` packs loose objects and refs, `git reflog expire --expire=now "
                 "--all` and `git fetch --prune` remove the logs of branches gone)" +
                 read_only;
        }
        const std::filesystem::path& entry = it->path();
        std::error_code type_error;
        // Objects of this git directory or of a submodule's (`modules/<name>/objects`: outside
        // review 65), never a ref or log named `objects`.
        const std::filesystem::path below = entry.lexically_relative(top);
        const std::string first = below.empty() ? "" : below.begin()->string();
        const bool in_objects =
            first == "objects" ||
            (first == "modules" &&
             std::any_of(below.begin(), below.end(),
                         [](const std::filesystem::path& part) { return part == "objects"; }) &&
             std::none_of(below.begin(), below.end(), [](const std::filesystem::path& part) {
               return part == "refs" || part == "logs";
             }));
        if (it->is_directory(type_error) && !it->is_symlink(type_error)) {
          const std::string name = entry.filename().string();
          const bool loose_dir = entry.parent_path().filename() == "objects" && name.size() == 2 &&
                                 std::isxdigit(static_cast<unsigned char>(name[0])) &&
                                 std::isxdigit(static_cast<unsigned char>(name[1]));
          if (loose_dir) it.disable_recursion_pending();
          continue;
        }
        std::error_code link_error;
        if (!it->is_symlink(link_error) || link_error) {
          // A file of git's with another name (a hard link: a hook kept in the tree, a loose ref)
          // is changed through that name, which no mount of the .git covers, and which the
          // launch cannot find (outside review 63). Objects are left: `git clone --local`
          // hard-links them, git reads them by their id, and the copy-back checks each.
          std::error_code count_error;
          if (!in_objects && it->is_regular_file(count_error) &&
              it->hard_link_count(count_error) > 1 && !count_error) {
            return "the repository " + repository + " has " + Printable(entry.string(), 300) +
                   ", a file with another name (a hard link), through which a session could "
                   "change what git reads there; replace it with a copy (cp --remove-destination "
                   "--no-preserve=links), or open the session read-only";
          }
          continue;
        }
        const std::filesystem::path target = std::filesystem::read_symlink(entry, link_error);
        if (link_error) continue;
        const std::filesystem::path leads =
            target.is_absolute() ? target : entry.parent_path() / target;
        const std::filesystem::path resolved = std::filesystem::weakly_canonical(leads, type_error);
        if (!std::filesystem::is_directory(leads, type_error)) {
          // A link to a file (git-new-workdir's `config`, a loose ref): inside a .git of the walk,
          // that repository is kept (pinned); a file inside a root but outside every .git cannot
          // be kept (its directory may be a root, which is never made read-only: outside review
          // 63), so the launch is refused.
          std::filesystem::path relative;
          const bool in_a_git = !git_around(resolved).empty();
          const std::optional<std::filesystem::path> bare = git_dir_above(resolved.parent_path());
          if (!in_a_git && bare) {
            if (std::optional<std::string> refused =
                    keep(*bare, true, "the repository " + repository + " links into")) {
              return *refused + read_only;
            }
            continue;
          }
          if (!in_a_git &&
              (holding(resolved, relative) || holding(leads.lexically_normal(), relative))) {
            return "the repository " + repository + " links " + Printable(entry.string(), 300) +
                   " to " + Printable(resolved.string(), 300) +
                   ", a file inside a writable root, which a session could change; put the file "
                   "itself in the .git (or outside the workspace), or open the session read-only";
          }
          if (std::optional<std::string> refused =
                  keep(leads.parent_path(), true,
                       "the repository " + repository + " links " + Printable(entry.string(), 300) +
                           " into")) {
            return *refused + read_only;
          }
          continue;
        }
        if (std::optional<std::string> refused = keep(
                leads, true,
                "the repository " + repository + " links " + Printable(entry.string(), 300) + " to",
                Kept::kLinkTarget)) {
          return *refused + read_only;
        }
      }
    }
    // Borrowed object directories.
    constexpr int kGitAlternateDepth = 5;
    std::error_code objects_error;
    const std::filesystem::path own_objects =
        std::filesystem::weakly_canonical(common / "objects", objects_error);
    std::vector<std::pair<std::filesystem::path, int>> to_read = {
        {objects_error ? common / "objects" : own_objects, 0}};
    std::vector<std::filesystem::path> read_already;
    while (!to_read.empty()) {
      const auto [objects, depth] = to_read.back();
      to_read.pop_back();
      if (std::find(read_already.begin(), read_already.end(), objects) != read_already.end()) {
        continue;
      }
      read_already.push_back(objects);
      const std::filesystem::path file = objects / "info" / "alternates";
      const std::string fix = "; make the repository self-contained (git -C " + repository +
                              " repack -a -d while what it borrows is there, then remove " +
                              Printable(file.string(), 300) +
                              "), or remove the repository if a session made it" + read_only;
      struct stat link {};
      if (::lstat(file.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        return "the repository " + repository + " borrows objects through " +
               Printable(file.string(), 300) + ", a symbolic link, which ptybox does not follow" +
               fix;
      }
      ReadFile read = ReadRepositoryFile(AT_FDCWD, file.c_str(), O_NOFOLLOW, "", 64 * 1024, budget);
      if (read.status == ReadFile::Status::kTooLarge) {
        return "the repository " + repository +
               " borrows objects from more directories than a launch reads (" +
               Printable(file.string(), 300) + " is over 64 KiB)" + read_only;
      }
      if (read.status != ReadFile::Status::kRead) continue;
      std::string_view rest(read.bytes);
      while (!rest.empty()) {
        const size_t end = std::min(rest.find('\n'), rest.size());
        std::string line(rest.substr(0, end));
        rest.remove_prefix(std::min(end + 1, rest.size()));
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        if (line[0] == '"') {
          return "the repository " + repository +
                 " borrows objects from a directory named in a quoted line of " +
                 Printable(file.string(), 300) + ", which ptybox does not read" + fix;
        }
        // The raw path, as the kernel resolves it (`..` after a link: outside review 63).
        const std::filesystem::path raw = std::filesystem::path(line).is_absolute()
                                              ? std::filesystem::path(line)
                                              : objects / line;
        const std::filesystem::path named = raw.lexically_normal();
        std::error_code ec;
        const std::filesystem::path real = std::filesystem::weakly_canonical(raw, ec);
        if (depth + 1 < kGitAlternateDepth) {
          to_read.emplace_back(ec ? named : real.lexically_normal(), depth + 1);
        }
        if (read_already.size() + to_read.size() > kMaxSubmoduleDirs) {
          return "the repository " + repository +
                 " borrows objects from more directories than ptybox protects" + fix;
        }
        if (std::optional<std::string> refused =
                keep(raw, true, "the repository " + repository + " borrows objects from",
                     Kept::kObjects)) {
          return *refused + fix;
        }
        // A root daemon's copy-back reads them as root (its git, its object lookups): a
        // session's own repository borrowing from another owner's private one made the daemon
        // tell it which objects that one holds (outside review 62).
        if (::geteuid() == 0 && owner && !UserMayRead(raw, *owner)) {
          return "the repository " + repository + " borrows objects from " +
                 Printable(named.string(), 300) +
                 ", which the workspace's owner may not read; ptybox reads a repository's "
                 "objects as its daemon and lends that to no session" +
                 fix;
        }
      }
    }
    return std::nullopt;
  };
  // Judged once every gitlink is known (whether a repository is a submodule).
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> named_git_dirs;
  for (const std::filesystem::path& link : git_links) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::weakly_canonical(link, ec);
    if (!ec) named_git_dirs.emplace_back(link.parent_path().lexically_normal(), target);
  }
  // The repositories whose worktree holds a writable root (a workspace that is a directory of a
  // repository, as git finds it from there: the nearest `.git` above), whose index may list
  // submodules inside the root: the host's git run in that repository enters them. Outside
  // every writable root, so no session can change their path; opened as the host sees it.
  std::vector<std::filesystem::path> enclosing;
  for (const std::filesystem::path& r : normal_roots) {
    for (std::filesystem::path up = r.parent_path(); !up.empty(); up = up.parent_path()) {
      // As git's discovery finds it, a `.git` link followed (outside review 64).
      struct stat st {};
      if (::stat((up / ".git").c_str(), &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
        if (!InsideAnyRoot(up, normal_roots)) enclosing.push_back(up / ".git");
      }
      if (up == up.parent_path()) break;
    }
  }
  std::sort(enclosing.begin(), enclosing.end());
  enclosing.erase(std::unique(enclosing.begin(), enclosing.end()), enclosing.end());
  std::vector<std::filesystem::path> repositories = git_paths;
  repositories.insert(repositories.end(), enclosing.begin(), enclosing.end());
  for (const std::filesystem::path& git_path : repositories) {
    const std::filesystem::path worktree = git_path.parent_path().lexically_normal();
    std::filesystem::path worktree_relative;
    const std::optional<int> worktree_root = holding(worktree, worktree_relative);
    const bool outside = std::find(enclosing.begin(), enclosing.end(), git_path) != enclosing.end();
    if (!worktree_root && !outside) continue;
    const UniqueFd worktree_fd(outside
                                   ? ::open(worktree.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)
                                   : OpenAt2(*worktree_root, worktree_relative.c_str(),
                                             O_PATH | O_DIRECTORY | O_CLOEXEC, kBeneathAnyMount));
    if (!worktree_fd) continue;  // gone since the walk: no worktree for the host's git to enter
    std::filesystem::path git_dir;
    struct stat git_link {};
    if (outside && ::lstat(git_path.c_str(), &git_link) == 0 && S_ISLNK(git_link.st_mode)) {
      // Around the roots, a `.git` link is the person's (outside every root): its target is
      // the git directory.
      std::error_code ec;
      git_dir = std::filesystem::canonical(git_path, ec);
      if (ec || !std::filesystem::is_directory(git_dir, ec)) continue;
    } else {
      git_dir = GitDirectoryOf(git_path, worktree_fd.Get(), budget);
    }
    if (git_dir.empty()) continue;
    if (std::optional<std::string> refused = protect_followed(worktree, git_dir)) {
      return refused;
    }
    if (git_dir != git_path) named_git_dirs.emplace_back(worktree, git_dir);
    Result<Gitlinks> links = GitlinksOf(git_dir, budget);
    if (!links) return links.error().message;
    {
      // A root daemon reads what the session's user may not (a gitfile can name any host
      // directory): names from an index outside the writable roots are never shown.
      std::error_code ec;
      const std::filesystem::path real = std::filesystem::weakly_canonical(git_dir, ec);
      links->private_index = ::geteuid() == 0 && (ec || !InsideAnyRoot(real, normal_roots));
    }
    for (const std::string& link : links->paths) {
      // A path git itself would never check out (verify_path: empty, `.` or `..` components, a
      // `.git` one, absolute): no submodule git enters; such an entry (a session's own index)
      // must not make another directory read-only.
      if (!IsWorktreePath(link)) continue;
      const std::filesystem::path where = (worktree / link).lexically_normal();
      std::filesystem::path relative;
      const std::optional<int> root = holding(where, relative);
      if (!root) continue;  // outside every writable root: read-only in the session
      if (gitlink_dirs.size() >= kMaxSubmoduleDirs) {
        return "the repositories in the writable roots list more than " +
               std::to_string(kMaxSubmoduleDirs) +
               " submodules; ptybox protects each submodule directory and starts no session "
               "with more: make a smaller directory the workspace, or open the session read-only";
      }
      const UniqueFd dir(OpenAt2(*root, relative.c_str(),
                                 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kBeneathAnyMount));
      if (!dir) {
        const std::string repository = Printable(worktree.string(), 200);
        if (links->private_index) {
          return "the repository " + repository +
                 " lists a submodule whose directory is missing, not a directory, or reached "
                 "through a link (its index lies outside the writable roots, so it is not "
                 "named here): a session could make a repository there, which the host's "
                 "git would then enter and run. Check the submodules out (git -C " +
                 repository + " submodule update --init), or open the session read-only";
        }
        // The index's text is the repository's (or a session's): shown escaped and bounded.
        const std::string shown = Printable(link, 200);
        // A sparse checkout keeps a gitlink outside its cone and removes its directory.
        struct stat sparse {};
        const bool is_sparse = ::stat((git_dir / "info" / "sparse-checkout").c_str(), &sparse) == 0;
        return "the repository " + repository + " lists the submodule `" + shown + "`, but " +
               Printable(where.string(), 300) +
               " is missing, not a directory, or reached through a link: a session could "
               "make a repository there, which the host's git would then enter and run. "
               "Check it out (git -C " +
               repository + " submodule update --init -- " + shown +
               "), create the directory, or remove the entry (git -C " + repository +
               " rm --cached -- " + shown + ")" +
               (outside ? ""
                        : "; if a session made this repository, removing the repository "
                          "does as well") +
               (is_sparse ? "; if it lies outside the sparse checkout, bring it in (git -C " +
                                repository + " sparse-checkout add -- " + shown +
                                ") or make a workspace that leaves it out"
                          : "");
      }
      pins += std::distance(relative.begin(), relative.end());
      if (pins > kMaxSubmodulePins) {
        return "the submodules in the writable roots lie too deep to protect (more than " +
               std::to_string(kMaxSubmodulePins) +
               " directories to pin); ptybox protects each submodule directory and those above "
               "it and starts no session with more: make a smaller directory the workspace, or "
               "open the session read-only";
      }
      gitlink_dirs.push_back(where);
      // A repository of the walk only when its .git is a directory or a regular file, as the
      // walk protects: a link named .git is the session's to replace.
      struct stat st {};
      if (::fstatat(dir.Get(), ".git", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
        continue;
      }
      submodule_dirs.push_back(where);
    }
  }
  for (const auto& [worktree, git_dir] : named_git_dirs) {
    if (std::optional<std::string> refused = protect_git_dir(worktree, git_dir)) return refused;
    // What a `.git` link's target leads to as well (outside review 64; a gitfile's target was
    // judged with its repository already, and protect_followed judges each directory once).
    if (!LooksLikeGitDirectory(git_dir)) continue;  // a link to anywhere else is not git's
    if (std::optional<std::string> refused = protect_followed(worktree, git_dir)) return refused;
  }
  for (auto* dirs : {&submodule_dirs, &gitlink_dirs}) {
    std::sort(dirs->begin(), dirs->end());
    dirs->erase(std::unique(dirs->begin(), dirs->end()), dirs->end());
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::filesystem::path> WritableRoots(const SandboxSpec& sandbox) {
  std::vector<std::filesystem::path> roots = {sandbox.workspace_root};
  roots.insert(roots.end(), sandbox.writable_roots.begin(), sandbox.writable_roots.end());
  return roots;
}

LaunchRepositories RepositoriesOfLaunch(const SandboxSpec& sandbox, size_t max_entries,
                                        TreeWatch* watch, size_t look_max) {
  LaunchRepositories found;
  found.walked = true;
  if (sandbox.mode != policy::Mode::kWorkspaceWrite) return found;
  std::optional<uid_t> owner;
  std::vector<std::pair<std::filesystem::path, GitIdentity>> gits;
  std::vector<std::filesystem::path> links;
  for (const std::filesystem::path& root : WritableRoots(sandbox)) {
    Result<OpenedPath> opened = OpenRootNoFollow(root.lexically_normal());
    if (!opened) continue;  // the launch refuses it with its own message
    // One identity: a root daemon's session writes as the workspace's owner, an ordinary
    // user's as that user.
    if (!owner) owner = ::geteuid() == 0 ? opened->owner_uid : ::geteuid();
    RepositoryWalk walk = WalkRepositories(*opened, *owner, max_entries - found.entries, watch);
    links.insert(links.end(), walk.git_links.begin(), walk.git_links.end());
    found.entries += walk.entries;
    for (size_t i = 0; i < walk.git_paths.size(); ++i) {
      gits.emplace_back(std::move(walk.git_paths[i]), walk.git_ids[i]);
    }
    if (walk.incomplete) {
      found.incomplete = std::move(walk.incomplete);
      break;
    }
  }
  // Sorted by path, each once (nested roots are walked twice).
  std::sort(gits.begin(), gits.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  gits.erase(std::unique(gits.begin(), gits.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first; }),
             gits.end());
  for (auto& [path, id] : gits) {
    found.git_paths.push_back(std::move(path));
    found.git_ids.push_back(id);
  }
  if (!found.incomplete) {
    found.incomplete =
        CollectSubmoduleDirs(WritableRoots(sandbox), found.git_paths, links, found.submodule_dirs,
                             found.gitlink_dirs, owner, look_max);
  }
  return found;
}

bool SameRepositories(const LaunchRepositories& launched, const LaunchRepositories& now) {
  return launched.walked && now.walked && !launched.incomplete && !now.incomplete &&
         launched.git_paths == now.git_paths && launched.git_ids == now.git_ids &&
         launched.submodule_dirs == now.submodule_dirs && launched.gitlink_dirs == now.gitlink_dirs;
}

RepositoryWalk WalkRepositories(const OpenedPath& root, uid_t owner, size_t max_entries,
                                TreeWatch* watch, const std::vector<std::filesystem::path>& roots) {
  RepositoryWalk walk;
  const std::vector<std::filesystem::path> writable_roots =
      roots.empty() ? std::vector<std::filesystem::path>{root.path} : roots;
  std::deque<std::filesystem::path> queue;  // relative to the root
  queue.emplace_back();
  const UniqueFd root_dir(::openat(root.fd.Get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_dir) {
    walk.incomplete = Refusal(root.path, "it cannot be read: " + std::string(std::strerror(errno)));
    return walk;
  }
  while (!queue.empty() && !walk.incomplete) {
    const std::filesystem::path dir = std::move(queue.front());
    queue.pop_front();
    const int fd = dir.empty() ? ::dup(root_dir.Get())
                               : OpenAt2(root.fd.Get(), dir.c_str(),
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kBeneath);
    if (fd < 0) {
      const int error = errno;
      const std::filesystem::path parent = dir.parent_path();
      const UniqueFd parent_fd(
          parent.empty() ? ::dup(root_dir.Get())
                         : OpenAt2(root.fd.Get(), parent.c_str(),
                                   O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kBeneath));
      if (std::optional<std::string> why =
              OpenFailure(error, parent_fd ? parent_fd.Get() : -1, dir.filename().c_str(),
                          root.path, dir, owner)) {
        walk.incomplete = Refusal(root.path, *why);
      }
      continue;
    }
    if (watch != nullptr) {
      // Watched before it is read: an entry that arrives after the read is an event.
      if (std::optional<std::string> why = watch->Watch(fd)) {
        walk.incomplete = Refusal(root.path, *why);
        ::close(fd);
        continue;
      }
    }
    DIR* stream = ::fdopendir(fd);
    if (stream == nullptr) {
      ::close(fd);
      continue;
    }
    while (const dirent* entry = ::readdir(stream)) {
      const char* name = entry->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (++walk.entries > max_entries) {
        walk.incomplete =
            Refusal(root.path, "more than " + std::to_string(max_entries) + " entries");
        break;
      }
      // The entry's type from readdir where the filesystem gives it (no stat per entry: the
      // walk runs at every launch); another mount is refused when the directory is opened.
      unsigned char type = entry->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(::dirfd(stream), name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (std::strcmp(name, ".git") == 0) {
        struct stat git {};
        if ((type == DT_DIR || type == DT_REG) &&
            ::fstatat(::dirfd(stream), name, &git, AT_SYMLINK_NOFOLLOW) == 0) {
          walk.git_paths.push_back(root.path / dir / name);
          walk.git_ids.push_back(GitIdentity{git.st_dev, git.st_ino});
        } else if (type == DT_LNK) {
          // A repository whose .git is a link: what it names is its git directory (the host's
          // git follows the link); the launch protects it when it lies in a writable root.
          walk.git_links.push_back(root.path / dir / name);
        }
        continue;  // never walked into: it is protected as a whole
      }
      if (type == DT_DIR) queue.push_back(dir / name);
    }
    ::closedir(stream);
  }
  return walk;
}

namespace {

// The birth time of the object at `path` when it is still `id`; nullopt otherwise (gone,
// replaced, or a filesystem that keeps no birth time).
std::optional<struct statx_timestamp> BirthOf(const std::filesystem::path& path,
                                              const GitIdentity& id) {
  struct statx stx {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
              STATX_INO | STATX_BTIME, &stx) != 0) {
    return std::nullopt;
  }
  if ((stx.stx_mask & STATX_BTIME) == 0 || stx.stx_ino != id.ino ||
      ::makedev(stx.stx_dev_major, stx.stx_dev_minor) != id.dev) {
    return std::nullopt;
  }
  return stx.stx_btime;
}

bool NotBefore(const struct statx_timestamp& born, const struct timespec& started) {
  if (born.tv_sec != started.tv_sec) return born.tv_sec > started.tv_sec;
  return static_cast<long>(born.tv_nsec) >= started.tv_nsec;
}

}  // namespace

std::optional<std::string> UnprotectedRepository(
    const LaunchRepositories& after, const std::vector<std::filesystem::path>& session_mounts,
    const struct timespec& walk_started, const std::vector<std::filesystem::path>& covered) {
  if (!after.walked) return "internal error: the check after the launch has no walk";
  if (after.incomplete) return *after.incomplete;
  auto mounted = [&](const std::filesystem::path& path) {
    return std::binary_search(session_mounts.begin(), session_mounts.end(), path);
  };
  // The covers in place: composed, so what lies beneath them is not in the session.
  std::vector<std::filesystem::path> covers;
  for (const std::filesystem::path& dir : covered) {
    if (mounted(dir)) covers.push_back(dir);
  }
  auto beneath_a_cover = [&](const std::filesystem::path& path) {
    return std::any_of(covers.begin(), covers.end(), [&](const std::filesystem::path& dir) {
      const std::filesystem::path rel = path.lexically_relative(dir);
      return !rel.empty() && *rel.begin() != ".." && rel != ".";
    });
  };
  for (size_t i = 0; i < after.git_paths.size(); ++i) {
    const std::filesystem::path& path = after.git_paths[i];
    if (mounted(path) || beneath_a_cover(path)) continue;
    std::optional<struct statx_timestamp> born = BirthOf(path, after.git_ids[i]);
    if (born && NotBefore(*born, walk_started)) continue;  // created during the launch
    return "the repository " + path.string() +
           " is not protected in the session being opened: it was moved while the launch "
           "searched the roots or composed the session's mounts (a concurrent session "
           "renaming it?), and would have been writable there. Open again; if it recurs, stop "
           "what renames repositories in this workspace while sessions open, or open read-only.";
  }
  // Every submodule directory is a mount of the session (protected whole, or pinned): one that
  // is not was added (or emptied) after the launch's walk, and a pre-started shell launched
  // before that must not serve.
  for (const std::filesystem::path& dir : after.gitlink_dirs) {
    if (mounted(dir) || beneath_a_cover(dir)) continue;
    return "the submodule directory " + Printable(dir.string(), 300) +
           " is not protected in the session being opened: the submodule was added, or its "
           "directory changed, after the session's mounts were planned. Open again.";
  }
  return std::nullopt;
}

std::optional<std::string> CheckRepositoriesAfterLaunch(const SandboxSpec& sandbox,
                                                        const std::filesystem::path& init_binary,
                                                        pid_t session,
                                                        const struct timespec& walk_started,
                                                        size_t max_entries) {
  if (session <= 0) return "cannot tell a process of the session to check its repositories";
  WatchInstances().Acquire();
  // The last attempt's watch, ended (and the slot given back) after the answer is decided.
  std::optional<TreeWatch> watch;
  struct Ended {
    std::optional<TreeWatch>& watch;
    ~Ended() { EndWatch(std::move(watch)); }
  } ended{watch};
  for (int attempt = 0; attempt < kAfterLaunchWalks; ++attempt) {
    watch.reset();  // a retry's former watch: closed here, before another is opened
    Result<TreeWatch> opened = TreeWatch::Open(WritableRoots(sandbox));
    if (!opened) return opened.error().message;
    watch.emplace(std::move(*opened));
    const LaunchRepositories after = RepositoriesOfLaunch(sandbox, max_entries, &*watch);
    if (after.incomplete) return *after.incomplete;
    Result<std::vector<std::filesystem::path>> mounts = SessionMountPoints(session);
    // A program that already ended (a shell that exits at once) has no mounts to check and
    // runs nothing: its end is what the start reports.
    if (!mounts) {
      const std::optional<proc::StatFields> stat = proc::ReadStat(session);
      if (!stat || proc::IsDead(*stat)) return std::nullopt;
    }
    if (!mounts) return mounts.error().message;
    // Nothing arrived in a directory after it was read: the walk saw every repository the
    // tree held when it ended, and the session's mounts were read after that.
    if (!watch->Changed()) {
      return UnprotectedRepository(after, *mounts, walk_started,
                                   CoveredDirectories(sandbox, init_binary));
    }
  }
  return "directories kept arriving in " + sandbox.workspace_root.string() +
         " (or a writable root) while the launch checked its repositories " +
         std::to_string(kAfterLaunchWalks) +
         " times (made or moved by a concurrent session?); open again once that settles, or "
         "open read-only";
}

void EndWatchesInAHelperProcess() { g_end_in_helper.store(true); }

Result<std::vector<std::filesystem::path>> SessionMountPoints(pid_t pid) {
  const std::string file = "/proc/" + std::to_string(pid) + "/mountinfo";
  std::ifstream in(file);
  if (!in) {
    return Fail(ErrorKind::kSpawnFailed,
                "cannot read the session's mounts to check its repositories (" + file + ")", file);
  }
  std::vector<std::filesystem::path> points;
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point ...: the fifth field, spaces and the like as \ooo.
    size_t start = 0;
    for (int field = 0; field < 4 && start != std::string::npos; ++field) {
      start = line.find(' ', start);
      if (start != std::string::npos) ++start;
    }
    if (start == std::string::npos) continue;
    const size_t end = line.find(' ', start);
    const std::string escaped = line.substr(start, end == std::string::npos ? end : end - start);
    std::string point;
    for (size_t i = 0; i < escaped.size(); ++i) {
      auto octal = [&](size_t at) { return escaped[at] >= '0' && escaped[at] <= '7'; };
      if (escaped[i] == '\\' && i + 3 < escaped.size() && octal(i + 1) && octal(i + 2) &&
          octal(i + 3)) {
        point += static_cast<char>((escaped[i + 1] - '0') * 64 + (escaped[i + 2] - '0') * 8 +
                                   (escaped[i + 3] - '0'));
        i += 3;
      } else {
        point += escaped[i];
      }
    }
    points.emplace_back(std::move(point));
  }
  std::sort(points.begin(), points.end());
  return points;
}

}  // namespace ptybox::sandbox
