// Soundness of the fanotify way (docs/security.md, "Protected paths"): the kernel queues an
// event within the system call that linked the entry, after the entry is visible. The walk
// drains the queue, then records a directory's handle, then reads it. So an arrival in a
// directory the walk has read is either in its listing (it was visible before the read) or an
// event queued after the handle was recorded, which counts; an event drained before the handle
// was recorded was for an entry already visible to the read that follows. An event whose
// directory was never watched is outside the roots, or in a directory that arrived after its
// parent was read (itself an event there), or in one the walk reads later.
#include "sandbox/tree_watch.h"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "common/log.h"
#include "sandbox/path_open.h"
#include "sandbox/user_namespace.h"

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200  // Linux 6.5: a handle to compare, as fanotify reports it
#endif

namespace ptybox::sandbox {
namespace {

static_assert(kFanotifyArrivals == (FAN_CREATE | FAN_MOVED_TO | FAN_ONDIR));

constexpr uint32_t kInotifyArrivals = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR;

// The inotify watches every check holds together (counted per user, against a sysctl every
// other program of that user shares).
std::atomic<size_t> g_watches_held{0};

bool ReserveWatch() {
  if (g_watches_held.fetch_add(1) >= InotifyWatchBudget()) {
    g_watches_held.fetch_sub(1);
    return false;
  }
  return true;
}

// Reads the events queued when it is called, so that writers that outpace one reader never hold
// it: an event queued before the call is read (the check's last read follows the walk's end, so
// it sees every arrival during the walk); what writers queue meanwhile may be left for a later
// read. FIONREAD gives the count in `unit`s: inotify's counts the bytes of whole events (unit 1),
// fanotify's counts FAN_EVENT_METADATA_LEN per event whatever records follow it (so its unit is
// one event); `take` is handed each buffer read and answers how many units it held. An empty
// queue (EAGAIN) means everything queued before the call was read. False when the queue cannot
// be read.
template <typename Take>
bool ReadQueued(int fd, size_t unit, char* buffer, size_t size, Take take) {
  int queued = 0;
  if (::ioctl(fd, FIONREAD, &queued) != 0 || queued < 0) return false;
  for (size_t left = static_cast<size_t>(queued) / unit; left > 0;) {
    const ssize_t got = ::read(fd, buffer, size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) return true;
    if (got <= 0) return false;
    left -= std::min(left, std::max<size_t>(take(static_cast<size_t>(got)), 1));
  }
  return true;
}

// How many fanotify events a buffer read holds (their metadata's lengths chain them).
size_t FanotifyEvents(const char* buffer, size_t size) {
  size_t count = 0;
  for (size_t at = 0; at + FAN_EVENT_METADATA_LEN <= size; ++count) {
    fanotify_event_metadata event{};
    std::memcpy(&event, buffer + at, sizeof event);
    if (event.event_len < FAN_EVENT_METADATA_LEN) break;  // malformed: counted by its verdict
    at += event.event_len;
  }
  return count;
}

bool IsArrivalName(const char* name, size_t max) {
  return strnlen(name, max) == 4 && std::memcmp(name, ".git", 4) == 0;
}

// One event's verdict: true when it could have put a repository in a watched directory, or
// cannot be read whole (the safe side).
bool EventCounts(const fanotify_event_metadata& event, const char* start, const char* end,
                 const WatchedDirectories& dirs) {
  if ((event.mask & FAN_Q_OVERFLOW) != 0 || event.vers != FANOTIFY_METADATA_VERSION) return true;
  if ((event.mask & (FAN_CREATE | FAN_MOVED_TO)) == 0) return false;
  const char* at = start + event.metadata_len;
  while (at + sizeof(fanotify_event_info_header) <= end) {
    fanotify_event_info_header header;
    std::memcpy(&header, at, sizeof header);
    if (header.len < sizeof header || at + header.len > end) return true;
    const bool dfid = header.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME ||
                      header.info_type == FAN_EVENT_INFO_TYPE_DFID;
    constexpr size_t kHandleAt = sizeof(fanotify_event_info_fid);
    if (dfid && header.len >= kHandleAt + sizeof(file_handle)) {
      file_handle handle;
      std::memcpy(&handle, at + kHandleAt, sizeof handle);
      const char* bytes = at + kHandleAt + sizeof handle;
      if (bytes + handle.handle_bytes > at + header.len) return true;
      const std::string key =
          DirectoryKey(handle.handle_type, std::string_view(bytes, handle.handle_bytes));
      if (!dirs.contains(key)) return false;  // not a directory the walk watched
      if ((event.mask & FAN_ONDIR) != 0) return true;
      const char* name = bytes + handle.handle_bytes;
      return header.info_type == FAN_EVENT_INFO_TYPE_DFID ||
             IsArrivalName(name, static_cast<size_t>(at + header.len - name));
    }
    at += header.len;
  }
  return true;  // no directory record: cannot tell where it arrived
}

// A directory's key as fanotify names it: its file handle. The same encoding as fanotify's: both
// call the filesystem's encode_fh for the inode alone (no parent), AT_HANDLE_FID as fanotify
// does since Linux 6.5, the decodable handle before, when fanotify needed one too.
std::optional<std::string> KeyOf(int dir_fd) {
  alignas(file_handle) char storage[sizeof(file_handle) + MAX_HANDLE_SZ] = {};
  auto* handle = reinterpret_cast<file_handle*>(storage);
  handle->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (::name_to_handle_at(dir_fd, "", handle, &mount_id, AT_EMPTY_PATH | AT_HANDLE_FID) != 0 &&
      (errno != EINVAL || ::name_to_handle_at(dir_fd, "", handle, &mount_id, AT_EMPTY_PATH) != 0)) {
    return std::nullopt;
  }
  return DirectoryKey(handle->handle_type,
                      std::string_view(storage + sizeof(file_handle), handle->handle_bytes));
}

// One mark for the whole filesystem of `dir_fd`: a change through any of its mounts is reported.
bool MarkFilesystem(int fan, int dir_fd) {
  return ::fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, kFanotifyArrivals, dir_fd,
                         nullptr) == 0;
}

std::string Errno(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// A fanotify descriptor marked on the filesystem of each of `roots` (those that cannot be opened
// are left to the walk, which refuses them), and their devices; why not, otherwise.
Result<UniqueFd> OpenFanotify(const std::vector<std::filesystem::path>& roots,
                              std::vector<dev_t>& marked) {
  UniqueFd fan(::fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME,
                               O_RDONLY | O_LARGEFILE));
  if (!fan) return Fail(ErrorKind::kSandboxUnavailable, Errno("fanotify_init"));
  for (const std::filesystem::path& root : roots) {
    Result<OpenedPath> opened = OpenRootNoFollow(root.lexically_normal());
    if (!opened) continue;
    const UniqueFd dir(::openat(opened->fd.Get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) continue;
    if (!MarkFilesystem(fan.Get(), dir.Get())) {
      return Fail(ErrorKind::kSandboxUnavailable, Errno("fanotify_mark") + " on " + root.string());
    }
    if (!KeyOf(dir.Get())) {
      return Fail(ErrorKind::kSandboxUnavailable,
                  Errno("name_to_handle_at") + " on " + root.string());
    }
    marked.push_back(opened->dev);
  }
  return fan;
}

bool HostRoot() {
  static const bool host_root = RunsAsHostRoot();
  return host_root;
}

// Why a check does not use fanotify, or nullopt when it should.
std::optional<std::string> InotifyChosen() {
  if (!HostRoot()) return "not root of the host";
  if (const char* forced = std::getenv("PTYBOX_TREE_WATCH");
      forced != nullptr && std::string_view(forced) == "inotify") {
    return "PTYBOX_TREE_WATCH=inotify";
  }
  return std::nullopt;
}

// Said once: a root daemon checks with the budget where it could do without.
void LogInotifyOnce(const std::string& why) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  LogWarn("the check after a launch watches with inotify, one watch per directory (budget " +
          std::to_string(InotifyWatchBudget()) + "), not fanotify: " + why);
}

}  // namespace

std::string DirectoryKey(int handle_type, std::string_view handle_bytes) {
  std::string key(sizeof handle_type, '\0');
  std::memcpy(key.data(), &handle_type, sizeof handle_type);
  return key.append(handle_bytes);
}

bool ArrivalInWatched(std::span<const char> events, const WatchedDirectories& dirs) {
  const char* at = events.data();
  const char* end = events.data() + events.size();
  while (at < end) {
    if (static_cast<size_t>(end - at) < FAN_EVENT_METADATA_LEN) return true;
    fanotify_event_metadata event;
    std::memcpy(&event, at, sizeof event);
    if (event.event_len < FAN_EVENT_METADATA_LEN || event.metadata_len < FAN_EVENT_METADATA_LEN ||
        event.metadata_len > event.event_len || event.event_len > static_cast<size_t>(end - at)) {
      return true;
    }
    if (EventCounts(event, at, at + event.event_len, dirs)) return true;
    at += event.event_len;
  }
  return false;
}

namespace {

// A quarter of the per-user sysctl at `path` (`unread` when it cannot be read), at least `floor`:
// the share of a limit every other program of the user also draws on.
size_t QuarterOfSysctl(const char* path, size_t unread, size_t floor) {
  size_t limit = unread;
  std::ifstream(path) >> limit;
  return std::max<size_t>(limit / 4, floor);
}

}  // namespace

size_t WatchInstanceBudget() {
  static const size_t budget =
      QuarterOfSysctl("/proc/sys/fs/inotify/max_user_instances", 128, 1);  // 128: the default
  return budget;
}

size_t InotifyWatchBudget() {
  static const size_t budget = [] {
    // 8192: the kernel's floor.
    size_t quarter = QuarterOfSysctl("/proc/sys/fs/inotify/max_user_watches", 8192, 1024);
    if (const char* lower = std::getenv("PTYBOX_INOTIFY_WATCH_BUDGET"); lower != nullptr) {
      char* end = nullptr;
      const unsigned long long wanted = std::strtoull(lower, &end, 10);
      if (end != lower && *end == '\0' && wanted > 0) quarter = std::min<size_t>(quarter, wanted);
    }
    return quarter;
  }();
  return budget;
}

Result<TreeWatch> TreeWatch::Open(const std::vector<std::filesystem::path>& roots) {
  std::optional<std::string> why = InotifyChosen();
  if (!why) {
    std::vector<dev_t> marked;
    Result<UniqueFd> fan = OpenFanotify(roots, marked);
    if (fan) {
      TreeWatch watch(Kind::kFanotify, std::move(*fan));
      watch.marked_ = std::move(marked);
      return watch;
    }
    why = "it failed (" + fan.error().message + ")";
  }
  if (HostRoot()) LogInotifyOnce(*why);
  UniqueFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify) {
    return Fail(ErrorKind::kSpawnFailed, "cannot watch the roots while they are searched (" +
                                             Errno("inotify_init1") +
                                             "); raise fs.inotify.max_user_instances");
  }
  return TreeWatch(Kind::kInotify, std::move(inotify));
}

TreeWatch::TreeWatch(TreeWatch&& other) noexcept
    : kind_(other.kind_),
      fd_(std::move(other.fd_)),
      marked_(std::move(other.marked_)),
      dirs_(std::move(other.dirs_)),
      changed_(other.changed_),
      watches_held_(std::exchange(other.watches_held_, 0)) {}

TreeWatch::~TreeWatch() {
  fd_.Reset();  // the watches go with it, then the budget is given back
  g_watches_held.fetch_sub(watches_held_);
}

std::optional<std::string> TreeWatch::Watch(int dir_fd) {
  return kind_ == Kind::kFanotify ? WatchWithFanotify(dir_fd) : WatchWithInotify(dir_fd);
}

std::optional<std::string> TreeWatch::WatchWithFanotify(int dir_fd) {
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0) return "a directory cannot be watched (" + Errno("fstat") + ")";
  if (std::find(marked_.begin(), marked_.end(), st.st_dev) == marked_.end()) {
    // Another filesystem on the same mount (a btrfs subvolume): marked before its first
    // directory is read, so before any of its directories is; where the kernel refuses that
    // (a subvolume is not its filesystem's root), each of its directories is marked alone.
    if (MarkFilesystem(fd_.Get(), dir_fd)) {
      marked_.push_back(st.st_dev);
    } else if (::fanotify_mark(fd_.Get(), FAN_MARK_ADD, kFanotifyArrivals, dir_fd, nullptr) != 0) {
      return "a directory on another filesystem inside the root cannot be watched (" +
             Errno("fanotify_mark") + "); make a smaller directory the root";
    }
  }
  Drain();  // what was queued before this directory is recorded was visible to its read
  std::optional<std::string> key = KeyOf(dir_fd);
  if (!key) return "a directory cannot be watched (" + Errno("name_to_handle_at") + ")";
  dirs_.insert(std::move(*key));
  return std::nullopt;
}

std::optional<std::string> TreeWatch::WatchWithInotify(int dir_fd) {
  if (!ReserveWatch()) {
    return "more directories are being checked at once than the watch budget (" +
           std::to_string(InotifyWatchBudget()) +
           ", a quarter of fs.inotify.max_user_watches) allows; open again once other launches "
           "are done, narrow the roots, or raise the sysctl (a daemon run as root of the host "
           "watches with fanotify and needs no budget)";
  }
  ++watches_held_;
  const std::string self = "/proc/self/fd/" + std::to_string(dir_fd);
  if (::inotify_add_watch(fd_.Get(), self.c_str(), kInotifyArrivals) < 0) {
    return "a directory cannot be watched while it is searched (" + Errno("inotify_add_watch") +
           "); raise fs.inotify.max_user_watches (sysctl) or narrow the roots";
  }
  return std::nullopt;
}

void TreeWatch::Drain() {
  alignas(fanotify_event_metadata) char buffer[16384];
  const bool read =
      ReadQueued(fd_.Get(), FAN_EVENT_METADATA_LEN, buffer, sizeof buffer, [&](size_t got) {
        if (!changed_) changed_ = ArrivalInWatched({buffer, got}, dirs_);
        return FanotifyEvents(buffer, got);
      });
  if (!read) changed_ = true;  // an unreadable queue: the safe side
}

namespace {

// A directory made or moved in, or a `.git` of either kind arriving.
bool InotifyArrival(const inotify_event& event) {
  if ((event.mask & IN_Q_OVERFLOW) != 0) return true;
  if ((event.mask & (IN_CREATE | IN_MOVED_TO)) == 0) return false;
  return (event.mask & IN_ISDIR) != 0 || (event.len > 0 && IsArrivalName(event.name, event.len));
}

}  // namespace

bool TreeWatch::Changed() {
  if (kind_ == Kind::kFanotify) {
    Drain();
    return changed_;
  }
  bool changed = false;
  alignas(inotify_event) char buffer[16384];
  const bool read = ReadQueued(fd_.Get(), 1, buffer, sizeof buffer, [&](size_t got) {
    for (size_t at = 0; at < got;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      changed = changed || InotifyArrival(*event);
      at += sizeof(inotify_event) + event->len;
    }
    return got;
  });
  return changed || !read;
}

ProbeResult ProbeTreeWatch(const std::filesystem::path& root) {
  ProbeResult probe{.name = "repository check", .ok = true, .detail = {}, .fix = {}};
  std::optional<std::string> why = InotifyChosen();
  if (!why) {
    std::vector<dev_t> marked;
    Result<UniqueFd> fan = OpenFanotify({root}, marked);
    if (fan) {
      probe.detail = "fanotify, one mark per filesystem of the roots (no per-directory budget)";
      return probe;
    }
    why = "fanotify failed: " + fan.error().message;
    probe.fix =
        "a kernel with fanotify (CONFIG_FANOTIFY, Linux 5.9+) and roots on a filesystem that "
        "reports file handles";
  } else if (HostRoot()) {
    probe.fix = "unset PTYBOX_TREE_WATCH";
  }
  // Root of the host on inotify could do without the budget: said as a warning.
  probe.ok = !HostRoot();
  probe.detail = "inotify, one watch per directory of the roots, from a budget of " +
                 std::to_string(InotifyWatchBudget()) + " for all checks at once (" + *why + ")";
  return probe;
}

}  // namespace ptybox::sandbox
