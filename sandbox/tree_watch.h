// What the check after a launch watches while it walks the roots again (docs/security.md,
// "Protected paths"): an arrival (a directory made or moved in, a `.git` of either kind) in a
// directory after the walk read it, which could put a repository where the walk did not look.
//
// Two ways, one contract. A daemon that is root of the host (CAP_SYS_ADMIN in the initial user
// namespace) puts one fanotify mark on each filesystem the roots are on (FAN_MARK_FILESYSTEM, so
// a change made through any mount of it, a session's bind included, is reported) and attributes
// each event to the roots by its directory's file handle: an event counts when its directory is
// one the walk had watched (its handle recorded before it was read). Anyone else, and a root
// daemon whose kernel or filesystem refuses the mark, holds one inotify watch per directory from
// a budget the checks share (a quarter of fs.inotify.max_user_watches).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "sandbox/host_probe.h"

namespace ptybox::sandbox {

// The events a fanotify watch asks for: arrivals of files (a gitfile) and directories.
inline constexpr uint64_t kFanotifyArrivals =
    0x00000100 /*FAN_CREATE*/ | 0x00000080 /*FAN_MOVED_TO*/ | 0x40000000 /*FAN_ONDIR*/;

// The directories a fanotify watch has watched, by file handle (the key DirectoryKey makes), and
// whether a buffer of fanotify events (FAN_REPORT_DFID_NAME) holds one that could have put a
// repository in one of them: a directory made or moved in, or a `.git` arriving, or a lost event
// (FAN_Q_OVERFLOW, an event without its directory's record). The filesystem id is not compared
// (a btrfs subvolume's differs from the one its filesystem's mark reports): a directory of
// another filesystem with the same handle counts, the safe side. Pure, so that the attribution
// is tested on its own.
using WatchedDirectories = std::unordered_set<std::string>;
[[nodiscard]] std::string DirectoryKey(int handle_type, std::string_view handle_bytes);
[[nodiscard]] bool ArrivalInWatched(std::span<const char> events, const WatchedDirectories& dirs);

class TreeWatch {
 public:
  enum class Kind { kFanotify, kInotify };

  // A watch for the check of `roots`: fanotify for a daemon that is root of the host, marked on
  // each root's filesystem; inotify otherwise (a fanotify failure is logged once and said by
  // `fallback_reason`). The error text when neither can be opened.
  [[nodiscard]] static Result<TreeWatch> Open(const std::vector<std::filesystem::path>& roots);
  TreeWatch(TreeWatch&& other) noexcept;
  TreeWatch& operator=(TreeWatch&&) = delete;
  ~TreeWatch();

  [[nodiscard]] Kind kind() const { return kind_; }
  // The watch's descriptor (its fanotify group or inotify instance), still owned by the watch.
  [[nodiscard]] int fd() const { return fd_.Get(); }
  // Watches the directory open at `dir_fd` before the walk reads it; why it cannot be, or
  // nullopt.
  [[nodiscard]] std::optional<std::string> Watch(int dir_fd);
  // Reads the events queued by now (not those writers add while it reads): true when something
  // may have arrived in a directory after it was watched (an unreadable queue counts as a change).
  [[nodiscard]] bool Changed();

 private:
  TreeWatch(Kind kind, UniqueFd fd) : kind_(kind), fd_(std::move(fd)) {}
  std::optional<std::string> WatchWithFanotify(int dir_fd);
  std::optional<std::string> WatchWithInotify(int dir_fd);
  void Drain();

  Kind kind_;
  UniqueFd fd_;
  std::vector<dev_t> marked_;  // the filesystems of the roots (fanotify)
  WatchedDirectories dirs_;    // watched so far (fanotify)
  bool changed_ = false;       // an arrival drained during the walk (fanotify)
  size_t watches_held_ = 0;    // from the shared inotify budget
};

// The inotify watches the checks together may hold: a quarter of fs.inotify.max_user_watches
// (at least 1,024), or less when PTYBOX_INOTIFY_WATCH_BUDGET names a smaller number.
[[nodiscard]] size_t InotifyWatchBudget();

// The watch instances (inotify instances or fanotify groups) the checks may hold at once: a
// quarter of fs.inotify.max_user_instances (128 by default), at least 1.
[[nodiscard]] size_t WatchInstanceBudget();

// How this process would watch a check of `root` (the doctor's line): fanotify, or inotify with
// its budget and why.
[[nodiscard]] ProbeResult ProbeTreeWatch(const std::filesystem::path& root);

}  // namespace ptybox::sandbox
