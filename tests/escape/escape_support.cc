// The escape suite's fixture and small host-side helpers (listener, host PTY, parsers).
#include "tests/escape/escape_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pty.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "sandbox/mount_stage.h"
#include "tests/sandbox/process_runner.h"
#include "tests/sandbox/sandbox_runner.h"
#include "tests/support/files.h"

namespace ptybox::testing {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

namespace {

void Git(const fs::path& workspace, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "git",
                                   "-C",           workspace.string(),
                                   "-c",           "user.name=ptybox",
                                   "-c",           "user.email=ptybox@example.com"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult run = RunProcess(argv);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
}

}  // namespace

std::string Observed::Show() const {
  return "[" + mode + "] " + name + ": `" + command + "` -> exitCode " +
         (exit < 0 ? std::string("null") : std::to_string(exit)) + ", waitReason " +
         result.value("waitReason", std::string("?")) + ", viewport \"" +
         testing::EscapeControls(text) + "\"" +
         (result.contains("error") ? " error " + result["error"].dump() : "");
}

Observed RunInSession(RpcClient& client, const std::string& session, const std::string& mode,
                      const std::string& name, const std::string& command) {
  Observed o;
  o.mode = mode;
  o.name = name;
  o.command = command;
  // Every observation ends at the shell's prompt: a command quiet for longer than the default
  // silence (a download on a busy machine) must not settle it early.
  o.result =
      Send(client, session, command + "\n", Json{{"timeoutMs", 60000}, {"silenceMs", 60000}});
  if (o.result.contains("exitCode") && o.result["exitCode"].is_number_integer()) {
    o.exit = o.result["exitCode"].get<int>();
  }
  if (o.result.contains("viewport") && o.result["viewport"].is_string()) {
    o.text = o.result["viewport"].get<std::string>();
  }
  EXPECT_EQ(o.result.value("waitReason", std::string()), "stdin_read") << o.Show();
  EXPECT_EQ(o.result.contains("sessionStatus") ? o.result["sessionStatus"].value("kind", "") : "",
            "running")
      << o.Show();
  // The observation log that docs/sandbox.md's table is read from.
  std::cout << "  observed " << o.Show() << "\n" << std::flush;
  return o;
}

void PrepareWorkspace(const fs::path& workspace) {
  Git(workspace, {"init", "-q"});
  std::ofstream(workspace / "tracked.txt") << "tracked\n";
  std::ofstream(workspace / ".ptybox.yaml") << kRepoPolicy;
  Git(workspace, {"add", "tracked.txt", ".ptybox.yaml"});
  Git(workspace, {"commit", "-q", "-m", "initial"});
  std::ofstream(workspace / ".git" / "info" / "exclude", std::ios::app) << "/.escape/\n/mnt/\n";
  fs::create_directories(workspace / "mnt");
  // The probes live in the workspace, visible in every mode (the source and build trees are
  // not when they are under /tmp).
  fs::create_directories(workspace / ".escape");
  fs::copy_file(ESCAPE_PROBE_SCRIPT, workspace / ".escape" / "escape_probe.py");
  fs::copy_file(sandbox::testing::ProbeBinary(), workspace / ".escape" / "ptybox-sandbox-probe");
}

std::string EscapeTest::NewSecret() {
  std::random_device random;
  return "s3cr3t" + std::to_string(::getpid()) + "x" + std::to_string(random());
}

void EscapeTest::SetUp() {
  PrepareWorkspace(workspace());
  session_ = OpenSession(client_, Mode());
  ASSERT_FALSE(session_.empty()) << "terminal_open failed in " << Mode() << "; daemon log:\n"
                                 << daemon_.Log();
}

std::string EscapeTest::Probe(const std::string& args) const {
  return "python3 " + Quote(workspace() / ".escape" / "escape_probe.py") + " " + args;
}

std::string EscapeTest::Unique() const {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '-');
  return std::to_string(::getpid()) + "-" + name;
}

Listener::Listener() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd_, 8) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

bool Listener::HasPendingConnection() {
  const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return false;
  ::close(conn);
  return true;
}

HostPty::HostPty() {
  char name[64] = {};
  if (::openpty(&master_, &slave_, name, nullptr, nullptr) != 0) {
    master_ = slave_ = -1;
    return;
  }
  ::fcntl(master_, F_SETFD, FD_CLOEXEC);
  ::fcntl(slave_, F_SETFD, FD_CLOEXEC);
  number_ = fs::path(name).filename().string();
}

HostPty::~HostPty() {
  if (slave_ >= 0) ::close(slave_);
  if (master_ >= 0) ::close(master_);
}

std::string Quote(const fs::path& path) {
  std::string out = "'";
  for (char c : path.string()) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool IsUnder(const fs::path& path, const fs::path& dir) {
  const fs::path rel = fs::weakly_canonical(path).lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// Whether a session sees `dir` as the host has it (read-only): not below a directory every
// sandbox replaces with its own (/tmp, /dev/shm, /run), and, for a root daemon whose sessions run
// as an unprivileged id, not veiled (a clone in /root).
static bool VisibleInsideSessions(const fs::path& dir) {
  for (const char* own : {"/tmp", "/dev/shm", "/run"}) {
    if (IsUnder(dir, own)) return false;
  }
  return ::geteuid() != 0 || sandbox::TopmostVeil(dir / "x").empty();
}

fs::path OutsideDir() {
  // The unprivileged run (tests/unprivileged/) names a directory its user may write.
  const char* unprivileged = std::getenv("PTYBOX_ESCAPE_OUTSIDE_DIR");
  fs::path dir = ESCAPE_OUTSIDE_DIR;
  if (unprivileged != nullptr && *unprivileged != '\0' && fs::is_directory(unprivileged)) {
    dir = unprivileged;
  }
  if (VisibleInsideSessions(dir)) return dir;
  // A build tree in /tmp (a clone there) or a veiled one: a visible host directory of this uid
  // instead (/var/tmp is sticky and visible read-only inside the sandbox).
  const fs::path visible = "/var/tmp/ptybox-escape-outside-" + std::to_string(::geteuid());
  std::error_code ec;
  fs::create_directories(visible, ec);
  fs::permissions(visible,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  return visible;
}

std::map<std::string, std::string> StatusFields(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::vector<std::string> value = Words(line.substr(colon + 1));
    fields[line.substr(0, colon)] = value.empty() ? "" : value.front();
  }
  return fields;
}

std::map<std::string, std::string> ProbeResults(const std::string& text) {
  std::map<std::string, std::string> results;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> words = Words(line);
    if (words.size() >= 2) results[words[0]] = words[1];
  }
  return results;
}

}  // namespace ptybox::testing
