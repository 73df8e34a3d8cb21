// The host probes on this host (they must pass: CI sandboxes for real), FindBwrap's search
// order, and the errors for a bwrap that fails like a host without user namespaces and for a
// missing bwrap.
#include "sandbox/host_probe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include "sandbox/container_env.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one scope.
class ScopedEnv final {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class HostProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ptybox-probe-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    // A root daemon execs bwrap as the session's unprivileged id: the fakes must be reachable.
    chmod(dir_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Script(const std::string& name, const std::string& body) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  fs::path FakeUidMapBwrap() {
    return Script("bwrap", "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n");
  }

  fs::path dir_;
};

TEST_F(HostProbeTest, ProbesPassOnThisHost) {
  const fs::path bwrap = FindBwrap();
  const std::vector<ProbeResult> results = ProbeHost(bwrap);
  std::vector<std::string> names;
  for (const ProbeResult& result : results) {
    std::cout << "  " << (result.ok ? "ok   " : "FAIL ") << result.name << ": " << result.detail
              << (result.ok ? "" : "\n       fix: " + result.fix) << "\n";
    names.push_back(result.name);
    EXPECT_TRUE(result.ok) << result.name << ": " << result.detail;
    EXPECT_EQ(result.fix.empty(), result.ok) << result.name;
  }
  const std::vector<std::string> expected = {"bwrap",          "user-namespaces", "seccomp",
                                             "seccomp-filter", "session-ids",     "sandbox-start",
                                             "sandbox-pty",    "no-host-root"};
  EXPECT_EQ(names, expected);
  auto required = RequireSandbox(bwrap);
  EXPECT_TRUE(required.has_value()) << (required ? "" : required.error().Describe());
}

TEST_F(HostProbeTest, FindBwrapHonoursTheEnvironmentThenPath) {
  {
    ScopedEnv env("PTYBOX_BWRAP", "/opt/custom/bwrap");
    EXPECT_EQ(FindBwrap(), fs::path("/opt/custom/bwrap"));
  }
  const fs::path fake = Script("bwrap", "exit 0\n");
  {
    ScopedEnv env("PTYBOX_BWRAP", nullptr);
    ScopedEnv path("PATH", (dir_.string() + ":/usr/bin:/bin").c_str());
    EXPECT_EQ(FindBwrap(), fake);
  }
  {
    // Relative PATH entries are never searched.
    ScopedEnv env("PTYBOX_BWRAP", "");
    ScopedEnv path("PATH", (".:" + dir_.filename().string() + ":/nonexistent").c_str());
    const fs::path cwd = fs::current_path();
    fs::current_path(dir_);
    EXPECT_EQ(FindBwrap(), fs::path("/usr/bin/bwrap"));
    fs::current_path(cwd);
  }
}

TEST_F(HostProbeTest, UidMapFailureNamesUserNamespacesAndAFix) {
  const fs::path fake = FakeUidMapBwrap();
  auto required = RequireSandbox(fake);
  ASSERT_FALSE(required.has_value());
  const Error& error = required.error();
  std::cout << "  RequireSandbox: " << error.message << "\n";
  EXPECT_EQ(error.kind, ErrorKind::kSandboxUnavailable);
  EXPECT_NE(error.message.find("setting up uid map: Permission denied"), std::string::npos);
  EXPECT_NE(error.message.find("user namespace"), std::string::npos);
  // On a host: the sysctl to set. Inside a container (CI's machine may be one): the engine's
  // flags, and that the host's settings cannot be changed from inside (container_env.h).
  if (InContainer()) {
    EXPECT_NE(error.message.find("cannot be changed from inside"), std::string::npos);
    EXPECT_EQ(error.message.find("sysctl -w"), std::string::npos);
  } else {
    EXPECT_NE(error.message.find("sysctl -w"), std::string::npos);
  }
  EXPECT_NE(error.message.find("never falls back"), std::string::npos);

  const Error diagnosed =
      DiagnoseSandboxFailure(fake, "bwrap: setting up uid map: Permission denied\n");
  std::cout << "  DiagnoseSandboxFailure: " << diagnosed.message << "\n";
  EXPECT_EQ(diagnosed.kind, ErrorKind::kSandboxUnavailable);
  EXPECT_NE(diagnosed.message.find("bwrap said: \"bwrap: setting up uid map: Permission denied\""),
            std::string::npos);
  // Said once, even though the probe saw the same message.
  EXPECT_EQ(diagnosed.message.find("uid map: Permission denied"),
            diagnosed.message.rfind("uid map: Permission denied"));
  EXPECT_NE(diagnosed.message.find("user namespace"), std::string::npos);
  EXPECT_NE(diagnosed.message.find("Fix: "), std::string::npos);
  EXPECT_NE(diagnosed.message.find("danger-full-access"), std::string::npos);
}

TEST_F(HostProbeTest, MissingBwrapNamesTheBubblewrapPackage) {
  const fs::path missing = dir_ / "no-such-bwrap";
  auto required = RequireSandbox(missing);
  ASSERT_FALSE(required.has_value());
  std::cout << "  " << required.error().message << "\n";
  EXPECT_EQ(required.error().kind, ErrorKind::kSandboxUnavailable);
  EXPECT_NE(required.error().message.find("apt-get install bubblewrap"), std::string::npos);
  EXPECT_NE(required.error().message.find(missing.string()), std::string::npos);

  // Every probe still reports; the sandbox ones say why they did not run.
  const std::vector<ProbeResult> results = ProbeHost(missing);
  ASSERT_EQ(results.size(), 8u);
  EXPECT_FALSE(results[0].ok);
  EXPECT_FALSE(results[5].ok);  // sandbox-start
  EXPECT_NE(results[5].detail.find("not run"), std::string::npos);

  const Error diagnosed = DiagnoseSandboxFailure(missing, "");
  EXPECT_NE(diagnosed.message.find("bubblewrap"), std::string::npos);
}

TEST_F(HostProbeTest, SessionSpecificFailureIsExplainedWhenTheHostIsFine) {
  const Error diagnosed = DiagnoseSandboxFailure(
      FindBwrap(), "bwrap: Can't find source path /work/gone: No such file or directory\n");
  std::cout << "  " << diagnosed.message << "\n";
  EXPECT_EQ(diagnosed.kind, ErrorKind::kSandboxUnavailable);
  EXPECT_NE(diagnosed.message.find("/work/gone"), std::string::npos);
  EXPECT_NE(diagnosed.message.find("does not exist"), std::string::npos);
  EXPECT_NE(diagnosed.message.find("never falls back"), std::string::npos);
}

TEST_F(HostProbeTest, HostileStderrIsSanitizedAndBounded) {
  const std::string hostile = "bwrap: \x1b]0;pwned\x07oops\n" + std::string(10000, 'A');
  const Error diagnosed = DiagnoseSandboxFailure(FindBwrap(), hostile);
  EXPECT_EQ(diagnosed.message.find('\x1b'), std::string::npos);
  EXPECT_EQ(diagnosed.message.find('\x07'), std::string::npos);
  EXPECT_LT(diagnosed.message.size(), 2000u);
}

TEST_F(HostProbeTest, HangingBwrapIsKilledAtTheDeadline) {
  // A bwrap that never exits must not hang the probe (10 s deadline, a hang guard only).
  const fs::path hanging = Script("bwrap",
                                  "case \"$1\" in --version) echo 'bubblewrap 0.8.0';; "
                                  "*) exec sleep 1000;; esac\n");
  auto required = RequireSandbox(hanging);
  ASSERT_FALSE(required.has_value());
  EXPECT_NE(required.error().message.find("did not finish"), std::string::npos)
      << required.error().message;
}

}  // namespace
}  // namespace ptybox::sandbox
