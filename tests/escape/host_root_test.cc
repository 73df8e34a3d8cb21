// No host root inside: through the real daemon, a confined session's processes never hold host
// uid 0 (read from the host's /proc), no id of theirs maps to host uid 0, root-only files and
// kernel settings stay out of reach, and what the session creates in the workspace is owned on
// the host like the workspace. danger-full-access is the control where the test runs as root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tests/escape/escape_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class HostRootTest : public EscapeTest {
 protected:
  // Opens another session of this mode whose processes carry `marker` in their environment.
  std::string OpenMarked(const std::string& marker) {
    return OpenSession(client_, Mode(), Json{{"env", {{"ESCAPE_MARK", marker}}}});
  }
  Observed RunIn(const std::string& session, const std::string& name, const std::string& command) {
    return RunInSession(client_, session, Mode(), name, command);
  }
};

// "Uid:\treal\teffective\tsaved\tfs" of /proc/PID/status, and the host-side view of its uid_map.
std::vector<std::string> HostUids(pid_t pid) {
  std::vector<std::string> uids;
  for (const std::string& line : ReadLines("/proc/" + std::to_string(pid) + "/status")) {
    if (line.rfind("Uid:", 0) == 0) uids = Words(line.substr(4));
  }
  return uids;
}

// True when a line of /proc/PID/uid_map, read from the host (the initial user namespace), maps
// some id of the process's namespace to host uid 0.
bool MapsToHostRoot(pid_t pid) {
  for (const std::string& line : ReadLines("/proc/" + std::to_string(pid) + "/uid_map")) {
    std::vector<std::string> f = Words(line);
    if (f.size() == 3 && f[1] == "0") return true;
  }
  return false;
}

TEST_P(HostRootTest, SessionProcessesNeverHoldHostRoot) {
  const std::string marker = "hostroot" + Unique();
  const std::string id = OpenMarked(marker);
  ASSERT_FALSE(id.empty()) << daemon_.Log();
  Observed o = RunIn(id, "uid", "id -u; cat /proc/self/uid_map; sleep 0 & wait");
  ASSERT_EQ(o.exit, 0) << o.Show();
  const std::vector<pid_t> pids = ProcessesWithEnv(marker);
  ASSERT_FALSE(pids.empty()) << "no process of the session found from the host";
  for (pid_t pid : pids) {
    const std::vector<std::string> uids = HostUids(pid);
    ASSERT_EQ(uids.size(), 4u) << pid;
    std::cout << "  observed [" << Mode() << "] pid " << pid << " host Uid: " << uids[0] << " "
              << uids[1] << " " << uids[2] << " " << uids[3]
              << (MapsToHostRoot(pid) ? " (maps to host 0)" : "") << "\n";
    if (Confined()) {
      for (const std::string& uid : uids) EXPECT_NE(uid, "0") << "pid " << pid << " is host root";
      EXPECT_FALSE(MapsToHostRoot(pid)) << "pid " << pid << " maps an id to host uid 0";
      if (::geteuid() != 0) {
        // A non-root daemon: the session runs as the daemon's own uid, as before.
        EXPECT_EQ(uids[1], std::to_string(::geteuid())) << pid;
      }
    } else if (::geteuid() == 0) {
      EXPECT_EQ(uids[1], "0") << "the control runs as the daemon: root";
    }
  }
}

TEST_P(HostRootTest, RootOnlyFilesAreUnreadable) {
  Observed shadow = Run("read-shadow", "head -c 5 /etc/shadow >/dev/null");
  Observed root_home = Run("list-root-home", "ls /root >/dev/null");
  if (Confined()) {
    EXPECT_EQ(shadow.exit, 1) << shadow.Show();
    EXPECT_TRUE(shadow.Says("Permission denied")) << shadow.Show();
    if (fs::exists("/root") &&
        (fs::status("/root").permissions() & fs::perms::others_read) == fs::perms::none) {
      EXPECT_NE(root_home.exit, 0) << root_home.Show();
      EXPECT_TRUE(root_home.Says("Permission denied")) << root_home.Show();
    }
  } else if (::geteuid() == 0) {
    EXPECT_EQ(shadow.exit, 0) << "the control (danger-full-access as root) reads it: "
                              << shadow.Show();
  } else {
    std::cout << "  control skipped: the test does not run as root, so danger-full-access "
                 "cannot read /etc/shadow either\n";
  }
}

TEST_P(HostRootTest, KernelSettingsRefuseWrites) {
  // Writes the current value back: harmless even where it succeeds (the control); restored from
  // outside whatever happens.
  const fs::path knob = "/proc/sys/kernel/core_pattern";
  const std::string before = ReadFile(knob);
  Observed o = Run("write-core_pattern",
                   "v=$(cat /proc/sys/kernel/core_pattern) && "
                   "printf '%s\\n' \"$v\" > /proc/sys/kernel/core_pattern");
  if (ReadFile(knob) != before && ::geteuid() == 0) std::ofstream(knob) << before;
  EXPECT_EQ(ReadFile(knob), before);
  if (Confined()) {
    EXPECT_NE(o.exit, 0) << o.Show();
    EXPECT_TRUE(o.Says("Permission denied") || o.Says("Read-only file system")) << o.Show();
  } else if (::geteuid() == 0) {
    EXPECT_EQ(o.exit, 0) << "the control (danger-full-access as root) writes it: " << o.Show();
  }
}

TEST_P(HostRootTest, WhatTheSessionCreatesIsOwnedLikeTheWorkspace) {
  if (Mode() != "workspace-write") GTEST_SKIP() << "only workspace-write writes the workspace";
  // The workspace as an ordinary user's (4242 has no account: the number is what counts).
  const bool root = ::geteuid() == 0;
  const uid_t owner = root ? 4242 : ::geteuid();
  const gid_t group = root ? 4243 : ::getegid();
  if (root) {
    for (const auto& entry : fs::recursive_directory_iterator(workspace())) {
      ASSERT_EQ(::lchown(entry.path().c_str(), owner, group), 0) << entry.path();
    }
    ASSERT_EQ(::chown(workspace().c_str(), owner, group), 0);
  } else {
    std::cout << "  not root: the workspace stays the test user's (" << owner << ")\n";
  }
  const std::string id = OpenMarked("owner" + Unique());
  ASSERT_FALSE(id.empty()) << daemon_.Log();
  Observed o = RunIn(id, "create",
                     "mkdir made-dir && echo x > made-dir/made-file && "
                     "echo x >> tracked.txt && stat -c '%u %g' . made-dir");
  ASSERT_EQ(o.exit, 0) << o.Show();
  for (const fs::path& made : {workspace() / "made-dir", workspace() / "made-dir" / "made-file"}) {
    struct stat st {};
    ASSERT_EQ(::stat(made.c_str(), &st), 0) << made;
    EXPECT_EQ(st.st_uid, owner) << made;
    EXPECT_EQ(st.st_gid, group) << made;
  }
  EXPECT_EQ(ReadFile(workspace() / "tracked.txt"), "tracked\nx\n");
  if (root) {
    // Inside, the workspace's owner is the session itself (root of its own namespace).
    const std::vector<std::string> ids = Words(o.text);
    EXPECT_EQ(ids, (std::vector<std::string>{"0", "0", "0", "0"})) << o.Show();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, HostRootTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
