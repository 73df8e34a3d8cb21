// The watch of the check after a launch (sandbox/tree_watch.h): which arrivals count, with real
// fanotify and inotify descriptors on real directories, and the attribution of fanotify's
// events on made-up buffers (an overflow, a truncated event).
#include "sandbox/tree_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/fanotify.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/user_namespace.h"
#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

// One fanotify event as the kernel lays it out with FAN_REPORT_DFID_NAME.
std::string Event(uint64_t mask, const __kernel_fsid_t& fsid, int handle_type,
                  const std::string& handle, const std::string& name) {
  fanotify_event_info_fid info{};
  info.hdr.info_type = FAN_EVENT_INFO_TYPE_DFID_NAME;
  info.fsid = fsid;
  file_handle head{};
  head.handle_bytes = static_cast<unsigned>(handle.size());
  head.handle_type = handle_type;
  std::string record(reinterpret_cast<const char*>(&info), sizeof info);
  record.append(reinterpret_cast<const char*>(&head), sizeof head);
  record += handle + name + '\0';
  record.resize((record.size() + 7) / 8 * 8, '\0');
  const auto record_len = static_cast<uint16_t>(record.size());
  std::memcpy(record.data() + offsetof(fanotify_event_info_header, len), &record_len,
              sizeof record_len);
  fanotify_event_metadata meta{};
  meta.vers = FANOTIFY_METADATA_VERSION;
  meta.metadata_len = FAN_EVENT_METADATA_LEN;
  meta.event_len = static_cast<uint32_t>(FAN_EVENT_METADATA_LEN + record.size());
  meta.mask = mask;
  meta.fd = FAN_NOFD;
  return std::string(reinterpret_cast<const char*>(&meta), sizeof meta) + record;
}

bool Counts(const std::string& events, const WatchedDirectories& dirs) {
  return ArrivalInWatched({events.data(), events.size()}, dirs);
}

// Attribution: an arrival counts only in a directory the walk watched, and only when it could
// be a repository (a directory, or a `.git`); a lost or unreadable event always counts.
TEST(TreeWatchTest, AnEventCountsOnlyInAWatchedDirectoryAndALostOneAlways) {
  const __kernel_fsid_t fsid{{7, 9}};
  const __kernel_fsid_t other_fsid{{7, 10}};
  const std::string walked = "\x01\x02\x03\x04\x05\x06\x07\x08";
  const WatchedDirectories dirs = {DirectoryKey(1, walked)};
  EXPECT_FALSE(Counts("", dirs));
  EXPECT_TRUE(Counts(Event(FAN_CREATE | FAN_ONDIR, fsid, 1, walked, "new"), dirs));
  EXPECT_TRUE(Counts(Event(FAN_MOVED_TO | FAN_ONDIR, fsid, 1, walked, "lib"), dirs));
  EXPECT_TRUE(Counts(Event(FAN_CREATE, fsid, 1, walked, ".git"), dirs));    // a gitfile
  EXPECT_FALSE(Counts(Event(FAN_CREATE, fsid, 1, walked, "notes"), dirs));  // a plain file
  EXPECT_FALSE(Counts(Event(FAN_CREATE, fsid, 1, walked, ".gitx"), dirs));
  // Outside the roots: another directory, or the same bytes as a handle of another type.
  EXPECT_FALSE(Counts(Event(FAN_CREATE | FAN_ONDIR, fsid, 1, "\x09\x02\x03\x04", "x"), dirs));
  EXPECT_FALSE(Counts(Event(FAN_CREATE | FAN_ONDIR, fsid, 2, walked, "x"), dirs));
  // The same handle reported with another filesystem id counts (a subvolume's id differs).
  EXPECT_TRUE(Counts(Event(FAN_CREATE | FAN_ONDIR, other_fsid, 1, walked, "x"), dirs));
  // One counting event among others counts.
  const std::string outside = Event(FAN_CREATE | FAN_ONDIR, fsid, 1, "\x09\x02", "x");
  EXPECT_TRUE(
      Counts(outside + Event(FAN_CREATE | FAN_ONDIR, fsid, 1, walked, "y") + outside, dirs));
  // A lost queue, a cut event, a record that overruns its event: something may have changed.
  fanotify_event_metadata overflow{};
  overflow.vers = FANOTIFY_METADATA_VERSION;
  overflow.metadata_len = overflow.event_len = FAN_EVENT_METADATA_LEN;
  overflow.mask = FAN_Q_OVERFLOW;
  overflow.fd = FAN_NOFD;
  EXPECT_TRUE(Counts(std::string(reinterpret_cast<const char*>(&overflow), sizeof overflow), {}));
  const std::string whole = Event(FAN_CREATE | FAN_ONDIR, fsid, 1, "\x09\x02", "x");
  EXPECT_TRUE(Counts(whole.substr(0, whole.size() - 8), dirs));
  EXPECT_TRUE(Counts(whole.substr(0, 10), dirs));
  std::string overrun = whole;
  const uint16_t too_long = 4096;
  std::memcpy(overrun.data() + FAN_EVENT_METADATA_LEN + offsetof(fanotify_event_info_header, len),
              &too_long, sizeof too_long);
  EXPECT_TRUE(Counts(overrun, dirs));
}

// Real descriptors, as the check opens them (fanotify as root of the host, inotify otherwise
// and when forced): arrivals in the watched directories count, arrivals elsewhere on the same
// filesystem (a sibling of the root) do not.
class TreeWatchKindTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      ::setenv("PTYBOX_TREE_WATCH", "inotify", 1);
    } else {
      ::unsetenv("PTYBOX_TREE_WATCH");
    }
    fs::create_directories(ws_ / "a");
    fs::create_directories(outside_);
  }
  void TearDown() override { ::unsetenv("PTYBOX_TREE_WATCH"); }

  // A watch of the root with its two directories watched, as the walk does before reading.
  TreeWatch Watched() {
    Result<TreeWatch> watch = TreeWatch::Open({ws_});
    EXPECT_TRUE(watch) << watch.error().message;
    const bool fanotify = !GetParam() && RunsAsHostRoot();
    EXPECT_EQ(watch->kind(), fanotify ? TreeWatch::Kind::kFanotify : TreeWatch::Kind::kInotify);
    for (const fs::path& dir : {ws_, ws_ / "a"}) {
      const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      EXPECT_GE(fd, 0) << dir;
      EXPECT_EQ(watch->Watch(fd), std::nullopt) << dir;
      ::close(fd);
    }
    return std::move(*watch);
  }

  ::ptybox::testing::TempDir tmp_;
  fs::path ws_ = tmp_.path() / "ws";
  fs::path outside_ = tmp_.path() / "outside";
};

TEST_P(TreeWatchKindTest, AnArrivalInTheWatchedDirectoriesCountsOneOutsideDoesNot) {
  {
    TreeWatch watch = Watched();
    fs::create_directories(outside_ / "x" / ".git");
    std::ofstream(outside_ / ".git") << "gitdir: /elsewhere\n";
    std::ofstream(ws_ / "a" / "notes") << "a plain file\n";
    fs::rename(outside_ / "x", outside_ / "y");
    EXPECT_FALSE(watch.Changed());
    fs::create_directory(ws_ / "a" / "new");
    EXPECT_TRUE(watch.Changed());
  }
  {
    TreeWatch watch = Watched();
    fs::rename(outside_ / "y", ws_ / "a" / "lib");  // moved in from outside the roots
    EXPECT_TRUE(watch.Changed());
  }
  {
    TreeWatch watch = Watched();
    std::ofstream(ws_ / ".git") << "gitdir: /elsewhere\n";  // a gitfile
    EXPECT_TRUE(watch.Changed());
  }
  {
    TreeWatch watch = Watched();
    fs::rename(ws_ / "a" / "lib", ws_ / "lib");  // from one watched directory to another
    EXPECT_TRUE(watch.Changed());
  }
}

// An arrival queued behind many other events (a busy filesystem: every file made anywhere on it
// reaches a fanotify filesystem mark) is read by the check: its reads count what was queued in
// whole events, not in fanotify's FIONREAD bytes (the metadata length alone per event, less than
// half of what a read returns with a directory record and a name).
TEST_P(TreeWatchKindTest, AnArrivalBehindAThousandOtherEventsIsSeen) {
  TreeWatch watch = Watched();
  for (int i = 0; i < 1000; ++i) {
    std::ofstream(ws_ / "a" / ("file-" + std::to_string(i))) << "x";
  }
  fs::create_directory(ws_ / "a" / "late");
  EXPECT_TRUE(watch.Changed());
}

// Writers that keep queueing events (plain files made and removed in a watched directory, the
// safe kind: never an arrival) cannot hold a check: each look reads what was queued when it
// started, and an arrival queued before it is seen however busy the queue is.
TEST_P(TreeWatchKindTest, WritersThatKeepQueueingNeverHoldTheCheckNorHideAnArrival) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&, w] {
      const fs::path file = ws_ / "a" / ("busy-" + std::to_string(w));
      while (!stop.load()) {
        std::ofstream(file) << "x";
        ::unlink(file.c_str());
        // Paced (about 5,000 events a second each) so that a reader the busy machine holds
        // off for a while never finds the queue overflowed, which would rightly count as a
        // change: the queue stays busy at every look.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  int arrivals_seen = 0;
  for (int round = 0; round < 20; ++round) {
    TreeWatch watch = Watched();  // a change, once seen, stays seen: a new watch each round
    EXPECT_FALSE(watch.Changed()) << "round " << round;  // plain files only
    fs::create_directory(ws_ / "a" / ("dir-" + std::to_string(round)));
    arrivals_seen += watch.Changed() ? 1 : 0;
  }
  stop = true;
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(arrivals_seen, 20);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TreeWatchKindTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return std::string(param_info.param ? "inotify" : "asTheDaemonWould");
                         });

}  // namespace
}  // namespace ptybox::sandbox
