// Audit files are reached by descriptor (docs/security.md): a session that can write the
// directory above the audit log and the recordings' directory renames it away and puts a
// directory, or a symbolic link to a directory of its own, in its place. The daemon's later
// writes (the log's lines, a later session's recording) never land where the session points
// them: they go on into the very file and directory the daemon opened at startup, and stay
// hidden from later sessions wherever they now are. Startup refuses such a place
// (AuditLogTest.ALogOrRecordDirectoryInsideASessionRootIsRefusedAtStartup); here the operator's
// policy grants the writable root only after the daemon started (policy files are read at
// every spawn), the one way a session still reaches it. A confined session's own rename now
// fails (the directories above hidden paths are pinned), so the rename is done from outside.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) { return ptybox::testing::ReadFile(path); }

std::vector<fs::path> Casts(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".cast") found.push_back(entry.path());
  }
  return found;
}

class AuditRedirectTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AuditRedirectTest, RenamingOrReplacingTheParentNeverRedirectsTheDaemonsWrites) {
  const std::string mode = GetParam();
  for (const bool with_link : {false, true}) {
    SCOPED_TRACE(with_link ? "replaced by a symbolic link" : "replaced by a directory");
    TempDir base;
    const fs::path area = base.path() / "area";  // becomes a writable root after startup
    const fs::path logs = area / "logs";
    fs::create_directories(logs);
    const fs::path log = logs / "audit.jsonl";
    const fs::path casts = logs / "casts";
    const fs::path policy = base.path() / "operator.yaml";
    std::ofstream(policy) << "version: 1\n";
    Daemon daemon(Daemon::Options{
        {"--policy", policy.string(), "--audit-log", log.string(), "--record", casts.string()},
        {}});
    // The operator widens the policy later: sessions may now write `area`.
    std::ofstream(policy) << "version: 1\nwritable: [" << area.string() << "]\n";

    RpcClient client(daemon.socket());
    const std::string first = OpenSession(client, mode);
    ASSERT_FALSE(first.empty());
    // The attack: move the directory that holds the log and the recordings away, and put the
    // session's own in its place (a directory, or a link to one).
    const std::string replace = with_link ? "mkdir -p " + (area / "decoy" / "casts").string() +
                                                " && ln -s " + (area / "decoy").string() + " " +
                                                logs.string()
                                          : "mkdir -p " + (casts).string();
    Json attack = Send(client, first,
                       "mv " + logs.string() + " " + (area / "moved").string() + " && " + replace +
                           " && echo ATTACK-$((1+1))-DONE\n");
    const std::string attack_view = attack.value("viewport", attack.dump());
    EXPECT_EQ(attack_view.find("ATTACK-2-DONE"), std::string::npos) << attack_view;
    if (mode == "workspace-write") {
      // The directories above hidden paths are pinned in the session (docs/security.md,
      // "Wall 3"): its rename fails. The host, or a danger-full-access session, still can: the
      // same rename and replacement from outside, so the daemon's descriptors are still tested.
      EXPECT_NE(attack_view.find("busy"), std::string::npos) << attack_view;
      fs::rename(logs, area / "moved");
      if (with_link) {
        fs::create_directories(area / "decoy" / "casts");
        fs::create_directory_symlink(area / "decoy", logs);
      } else {
        fs::create_directories(casts);
      }
    }
    // The daemon writes on: a send (audit lines) and a second session (a new recording).
    EXPECT_EQ(Send(client, first, "echo after-$((40+2))\n")["viewport"], "after-42");
    const std::string second = OpenSession(client, mode);
    ASSERT_FALSE(second.empty());
    // The second session does not find the real log where it now is either.
    const fs::path real_dir = mode == "read-only" ? logs : area / "moved";
    Json look = Send(client, second,
                     "cat " + (real_dir / "audit.jsonl").string() + " 2>&1 | head -c 300; ls " +
                         (real_dir / "casts").string() + " 2>&1 | head -3; echo LOOKED\n");
    const std::string look_view = look.value("viewport", look.dump());
    EXPECT_NE(look_view.find("LOOKED"), std::string::npos) << look_view;
    EXPECT_EQ(look_view.find("audit_started"), std::string::npos) << look_view;
    EXPECT_EQ(look_view.find(".cast"), std::string::npos) << look_view;
    EXPECT_EQ(Send(client, second, "echo second-$((50+5))\n")["viewport"], "second-55");
    client.Disconnect();
    daemon.Stop(SIGTERM);

    if (mode == "read-only") {
      // Nothing moved, nothing planted.
      EXPECT_FALSE(fs::exists(area / "moved"));
      EXPECT_FALSE(fs::exists(area / "decoy"));
    } else {
      // Where the session pointed: nothing of the daemon's.
      for (const fs::path& planted : {logs, area / "decoy"}) {
        EXPECT_FALSE(fs::exists(planted / "audit.jsonl")) << planted;
        EXPECT_TRUE(Casts(planted / "casts").empty()) << planted;
      }
    }
    // Where the daemon's own file and directory are now: every line and both recordings.
    const std::string written = ReadAll(real_dir / "audit.jsonl");
    EXPECT_NE(written.find("echo after-$((40+2))"), std::string::npos) << written;
    EXPECT_NE(written.find("echo second-$((50+5))"), std::string::npos) << written;
    EXPECT_NE(written.find("\"event\":\"audit_stopped\""), std::string::npos) << written;
    EXPECT_TRUE(fs::exists(real_dir / "casts" / (first + ".cast")));
    const std::string second_cast = ReadAll(real_dir / "casts" / (second + ".cast"));
    EXPECT_NE(second_cast.find("second-55"), std::string::npos) << second_cast.substr(0, 400);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, AuditRedirectTest,
                         ::testing::Values("read-only", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
