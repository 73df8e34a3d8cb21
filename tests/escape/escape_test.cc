// The escape suite: through the real `ptybox serve --socket` and real bash, a session in each
// confined mode tries what a sandboxed agent must not manage, and what it must still manage.
// danger-full-access runs the same probes as the control: it proves each probe can see success.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>

#include "tests/escape/escape_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

TEST_P(EscapeTest, WritingOutsideTheWritableRootsFails) {
  // A host path outside /tmp (visible read-only inside) and one under the host's /tmp (not
  // visible at all: /tmp inside is a private tmpfs).
  const fs::path outside = OutsideDir() / ("outside-" + Unique());
  TempDir host_tmp;
  const fs::path in_host_tmp = host_tmp.path() / "outside";
  Observed a = Run("write-outside", "touch " + Quote(outside));
  Observed b = Run("write-host-tmp", "touch " + Quote(in_host_tmp));
  if (Confined()) {
    EXPECT_EQ(a.exit, 1) << a.Show();
    EXPECT_TRUE(
        a.Says(IsUnder(outside, "/tmp") ? "No such file or directory" : "Read-only file system"))
        << a.Show();
    EXPECT_FALSE(fs::exists(outside)) << a.Show();
    EXPECT_EQ(b.exit, 1) << b.Show();
    EXPECT_TRUE(b.Says("No such file or directory")) << b.Show();
    EXPECT_FALSE(fs::exists(in_host_tmp)) << b.Show();
    // Places a process would use to persist: only tried when confined (as root, danger mode
    // would really write them).
    // The daemon's home at its own path (a confined session's HOME is its private home).
    const char* daemon_home = std::getenv("HOME");
    const std::string host_home_probe =
        Quote(std::string(daemon_home != nullptr && *daemon_home != '\0' ? daemon_home : "/root") +
              "/.ptybox-escape-probe");
    for (const std::string& target : {std::string("/etc/ptybox-escape-probe"), host_home_probe,
                                      std::string("/usr/local/bin/ptybox-escape-probe")}) {
      Observed c = Run("write-system", "touch " + target);
      EXPECT_EQ(c.exit, 1) << c.Show();
      // A root daemon's session is not the owner of /root: refused before the mount is asked.
      EXPECT_TRUE(c.Says("Read-only file system") || c.Says("Permission denied")) << c.Show();
    }
  } else {
    EXPECT_EQ(a.exit, 0) << a.Show();
    EXPECT_TRUE(fs::exists(outside)) << a.Show();
    EXPECT_EQ(b.exit, 0) << b.Show();
    EXPECT_TRUE(fs::exists(in_host_tmp)) << b.Show();
  }
  std::error_code ec;
  fs::remove(outside, ec);
}

TEST_P(EscapeTest, WorkspaceAndTmpAreWritableExceptInReadOnly) {
  const fs::path file = workspace() / "written-inside";
  Observed w = Run("write-workspace", "echo data > written-inside && cat written-inside");
  if (Mode() == "read-only") {
    EXPECT_EQ(w.exit, 1) << w.Show();
    EXPECT_TRUE(w.Says("Read-only file system")) << w.Show();
    EXPECT_FALSE(fs::exists(file));
    // Nothing of the workspace can change: not a new directory, not a tracked file, not a
    // removal, not a rename.
    for (const char* command :
         {"mkdir newdir", "echo x >> tracked.txt", "rm tracked.txt", "mv tracked.txt moved.txt",
          "chmod 000 tracked.txt", "ln -s /etc/passwd link"}) {
      Observed o = Run("write-workspace", command);
      EXPECT_NE(o.exit, 0) << o.Show();
      EXPECT_TRUE(o.Says("Read-only file system")) << o.Show();
    }
    EXPECT_EQ(ReadFile(workspace() / "tracked.txt"), "tracked\n");
  } else {
    EXPECT_EQ(w.exit, 0) << w.Show();
    EXPECT_EQ(w.text, "data") << w.Show();
    EXPECT_EQ(ReadFile(file), "data\n") << "the write did not reach the host workspace";
  }
  // /tmp is writable in every mode; when confined it is private to the session.
  const std::string tmp_name = "/tmp/ptybox-escape-" + Unique();
  Observed t = Run("write-tmp", "echo data > " + tmp_name + " && cat " + tmp_name);
  EXPECT_EQ(t.exit, 0) << t.Show();
  EXPECT_EQ(t.text, "data") << t.Show();
  if (Confined()) {
    EXPECT_FALSE(fs::exists(tmp_name)) << "a confined session's /tmp reached the host";
  } else {
    EXPECT_TRUE(fs::exists(tmp_name));
    std::error_code ec;
    fs::remove(tmp_name, ec);
  }
}

TEST_P(EscapeTest, GitDirectoryAndPolicyFileStayReadOnly) {
  Observed touch = Run("write-.git", "touch .git/x");
  Observed move = Run("move-.git", "mv .git .git-moved && mv .git-moved .git");
  Observed commit = Run("git-commit",
                        "git -c user.name=e -c user.email=e@example.com commit "
                        "-q --allow-empty -m escape");
  Observed policy = Run("write-.ptybox.yaml", "touch .ptybox.yaml");
  // Git for agents (on unless PTYBOX_GIT_WRITE=0 in the daemon's environment, which it inherits
  // from the suite's): in workspace-write the session writes a private copy of .git that the
  // daemon copies back checked, git's own data only (tests/escape/git_write_test.cc). A stray
  // file never reaches the host's .git, which stays a mount point; the commit succeeds.
  const char* git_write_env = std::getenv("PTYBOX_GIT_WRITE");
  const bool git_write = Mode() == "workspace-write" &&
                         (git_write_env == nullptr || std::string_view(git_write_env) != "0");
  if (Confined()) {
    if (git_write) {
      EXPECT_EQ(touch.exit, 0) << touch.Show();
      EXPECT_EQ(commit.exit, 0) << commit.Show();
    } else {
      EXPECT_EQ(touch.exit, 1) << touch.Show();
      EXPECT_TRUE(touch.Says("Read-only file system")) << touch.Show();
    }
    EXPECT_FALSE(fs::exists(workspace() / ".git" / "x"));
    // .git is a mount point inside: it cannot be renamed or replaced either (in read-only the
    // whole workspace is read-only first).
    const char* const busy =
        Mode() == "read-only" ? "Read-only file system" : "Device or resource busy";
    EXPECT_EQ(move.exit, 1) << move.Show();
    EXPECT_TRUE(move.Says(busy)) << move.Show();
    if (!git_write) {
      EXPECT_EQ(commit.exit, 128) << commit.Show();
      EXPECT_TRUE(commit.Says("index.lock': Read-only file system")) << commit.Show();
    }
    EXPECT_EQ(policy.exit, 1) << policy.Show();
    EXPECT_TRUE(policy.Says("Read-only file system")) << policy.Show();
    Observed append = Run("write-.ptybox.yaml", "echo 'mode: danger-full-access' >> .ptybox.yaml");
    EXPECT_EQ(append.exit, 1) << append.Show();
    EXPECT_TRUE(append.Says("Read-only file system")) << append.Show();
    Observed remove = Run("remove-.ptybox.yaml", "rm -f .ptybox.yaml");
    EXPECT_EQ(remove.exit, 1) << remove.Show();
    EXPECT_TRUE(remove.Says(busy)) << remove.Show();
    EXPECT_EQ(ReadFile(workspace() / ".ptybox.yaml"), kRepoPolicy);
  } else {
    EXPECT_EQ(touch.exit, 0) << touch.Show();
    EXPECT_TRUE(fs::exists(workspace() / ".git" / "x"));
    EXPECT_EQ(move.exit, 0) << move.Show();
    EXPECT_EQ(commit.exit, 0) << commit.Show();
    EXPECT_EQ(policy.exit, 0) << policy.Show();
  }
  if (Mode() == "workspace-write") {
    // Beside the protected paths, the workspace itself is writable.
    Observed ok = Run("write-workspace", "touch ok");
    EXPECT_EQ(ok.exit, 0) << ok.Show();
    EXPECT_TRUE(fs::exists(workspace() / "ok"));
  }
}

TEST_P(EscapeTest, GitStatusWorks) {
  // A changed mtime makes git want to refresh the index (write .git/index.lock). Where .git is
  // read-only that refresh is skipped quietly: status still answers and exits 0.
  fs::last_write_time(workspace() / "tracked.txt",
                      fs::file_time_type::clock::now() + std::chrono::hours(1));
  Observed status = Run("git-status", "git status");
  EXPECT_EQ(status.exit, 0) << status.Show();
  EXPECT_TRUE(status.Says("nothing to commit, working tree clean")) << status.Show();
  Observed log = Run("git-log", "git log --oneline | wc -l");
  EXPECT_EQ(log.exit, 0) << log.Show();
  EXPECT_EQ(log.text, "1") << log.Show();
  EXPECT_FALSE(fs::exists(workspace() / ".git" / "index.lock"));
}

TEST_P(EscapeTest, HostLoopbackListenerIsUnreachable) {
  Listener listener;
  ASSERT_GT(listener.port(), 0);
  Observed c = Run("tcp-to-host-loopback", Probe("connect " + std::to_string(listener.port())));
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04X", listener.port());
  // The namespace layer on its own: the host's listening socket is not in this network
  // namespace's table.
  Observed table =
      Run("host-listener-in-/proc/net/tcp", "grep -ci ':" + std::string(hex) + " ' /proc/net/tcp");
  if (Confined()) {
    // The session's own lo: IP sockets are allowed, but nothing listens on that port there.
    EXPECT_EQ(c.exit, 1) << c.Show();
    EXPECT_TRUE(c.Says("connect: ECONNREFUSED")) << c.Show();
    EXPECT_FALSE(listener.HasPendingConnection());
    EXPECT_EQ(table.text, "0") << table.Show();
    Observed dev = Run("interfaces", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    EXPECT_EQ(dev.text, "lo") << dev.Show();
  } else {
    EXPECT_EQ(c.exit, 0) << c.Show();
    EXPECT_TRUE(c.Says("connect: ok")) << c.Show();
    EXPECT_TRUE(listener.HasPendingConnection());
    EXPECT_NE(table.text, "0") << table.Show();
  }
}

TEST_P(EscapeTest, LoopbackServersAnswerInsideTheSession) {
  // A dev server bound to 127.0.0.1 and one to ::1, each fetched by a client of the session.
  for (const char* host : {"127.0.0.1", "::1"}) {
    Observed o = Run(std::string("loopback-") + host, Probe(std::string("loopback ") + host));
    EXPECT_EQ(o.exit, 0) << o.Show();
    EXPECT_TRUE(o.Says(std::string("loopback ") + host + ": ok 200 ptybox-loopback")) << o.Show();
  }
  // bash's /dev/tcp as the client of a listener of the same session (the port is the one
  // python picked and printed; the listener accepts once).
  const std::string out = "/tmp/loopback-" + Unique() + ".out";
  Observed bash =
      Run("loopback-dev-tcp",
          "rm -f " + out +
              "; python3 -c 'import socket; s = socket.create_server((\"127.0.0.1\", 0)); "
              "print(s.getsockname()[1], flush=True); c, _ = s.accept(); "
              "print(\"got\", c.recv(64).decode().strip())' > " +
              out + " & until test -s " + out +
              "; do sleep 0.1; done; echo hello-dev-tcp > /dev/tcp/127.0.0.1/$(head -1 " + out +
              "); wait; tail -1 " + out + "; rm -f " + out);
  EXPECT_EQ(bash.exit, 0) << bash.Show();
  EXPECT_TRUE(bash.Says("got hello-dev-tcp")) << bash.Show();
  Observed names = Run("interfaces-netlink", Probe("interfaces"));
  EXPECT_EQ(names.exit, 0) << names.Show();
  if (Confined()) {
    // NETLINK_ROUTE works, and the namespace holds nothing but lo.
    EXPECT_TRUE(names.Says("interfaces: ok lo")) << names.Show();
    EXPECT_FALSE(names.Says("interfaces: ok lo ")) << names.Show();
  }
}

TEST_P(EscapeTest, RawAndPacketSocketsStayRefused) {
  Observed o = Run("raw-sockets", Probe("raw"));
  EXPECT_EQ(o.exit, 0) << o.Show();
  const std::map<std::string, std::string> confined = {{"inet-raw-icmp", "EPERM"},
                                                       {"inet6-raw-icmpv6", "EPERM"},
                                                       {"inet-sock-packet", "EPERM"},
                                                       {"packet-raw", "EAFNOSUPPORT"},
                                                       {"netlink-netfilter", "EPROTONOSUPPORT"}};
  std::map<std::string, std::string> seen;
  std::istringstream lines(o.text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string tag, what, result;
    if (words >> tag >> what >> result && tag == "raw") seen[what] = result;
  }
  for (const auto& [what, refused] : confined) {
    ASSERT_TRUE(seen.contains(what)) << what << ": " << o.Show();
    if (Confined()) {
      // The filter's errno, except where two rows match (SOCK_RAW with ICMP: type and protocol).
      EXPECT_TRUE(seen[what] == refused || (refused == "EPERM" && seen[what] == "EPROTONOSUPPORT"))
          << what << ": " << o.Show();
    } else if (::geteuid() == 0) {
      // The control: root holds CAP_NET_RAW and CAP_NET_ADMIN without the filter.
      EXPECT_EQ(seen[what], "ok") << what << ": " << o.Show();
    }
  }
}

TEST_P(EscapeTest, TiocstiFails) {
  for (const char* variant : {"tiocsti", "tiocsti-high"}) {
    Observed o = Run(variant, Probe(variant));
    if (Confined()) {
      EXPECT_EQ(o.exit, 1) << o.Show();
      EXPECT_EQ(o.text, std::string(variant) + ": EPERM Operation not permitted") << o.Show();
    } else if (::geteuid() == 0) {
      // The control: root holds CAP_SYS_ADMIN, so TIOCSTI works without the filter.
      EXPECT_EQ(o.exit, 0) << o.Show();
      EXPECT_EQ(o.text, std::string(variant) + ": ok injected b'x'") << o.Show();
    }
  }
  // Nothing was left in the shell's input.
  Observed after = Run("after-tiocsti", "echo clean");
  EXPECT_EQ(after.text, "clean") << after.Show();
}

TEST_P(EscapeTest, OnlyTheSessionsOwnPtyIsVisible) {
  // Two host PTYs, so at least one has a number other than the session's own /dev/pts/0.
  HostPty first;
  HostPty second;
  ASSERT_TRUE(first.ok() && second.ok());
  const std::string host_name = first.number() != "0" ? first.number() : second.number();
  Observed tty = Run("tty", "tty");
  Observed list = Run("ls-/dev/pts", "ls -1 /dev/pts | tr '\\n' ' '");
  Observed host = Run("host-pty", "ls /dev/pts/" + host_name);
  if (Confined()) {
    EXPECT_EQ(tty.text, "/dev/pts/0") << tty.Show();
    EXPECT_EQ(list.text, "0 ptmx") << list.Show();
    EXPECT_EQ(host.exit, 2) << host.Show();
    EXPECT_TRUE(host.Says("No such file or directory")) << host.Show();
  } else {
    EXPECT_EQ(host.exit, 0) << host.Show();
    std::vector<std::string> names = Words(list.text);
    EXPECT_NE(std::find(names.begin(), names.end(), host_name), names.end()) << list.Show();
  }
}

TEST_P(EscapeTest, HostProcessesAreInvisibleAndUnreachable) {
  const std::string test_pid = std::to_string(::getpid());
  const std::string daemon_pid = std::to_string(daemon_.pid());
  Observed comm = Run("see-test-process", "cat /proc/" + test_pid + "/comm");
  Observed kill = Run("signal-daemon", "kill -0 " + daemon_pid);
  // Builtins only (no child process of our own in the list): every process this shell sees.
  Observed all = Run(
      "process-list",
      "for p in /proc/[0-9]*; do { read -r c < $p/comm; } 2>/dev/null && echo -n \"$c \"; done");
  std::vector<std::string> names = Words(all.text);
  std::sort(names.begin(), names.end());
  if (Confined()) {
    EXPECT_EQ(comm.exit, 1) << comm.Show();
    EXPECT_TRUE(comm.Says("No such file or directory")) << comm.Show();
    EXPECT_EQ(kill.exit, 1) << kill.Show();
    EXPECT_TRUE(kill.Says("No such process")) << kill.Show();
    // Only the sandbox's own processes: ptybox-init (pid 1, bwrap --as-pid-1) and bash.
    EXPECT_EQ(names, (std::vector<std::string>{"bash", "ptybox-init"})) << all.Show();
    Observed pid1 = Run("pid-1", "cat /proc/1/comm");
    EXPECT_EQ(pid1.text, "ptybox-init") << pid1.Show();
  } else {
    EXPECT_EQ(comm.exit, 0) << comm.Show();
    EXPECT_EQ(comm.text + "\n", ReadFile("/proc/self/comm")) << comm.Show();
    EXPECT_EQ(kill.exit, 0) << kill.Show();
    EXPECT_NE(std::find(names.begin(), names.end(), "ptybox"), names.end()) << all.Show();
  }
}

TEST_P(EscapeTest, NamespacesAndMountsFail) {
  Observed userns = Run("unshare-user", "unshare -U true");
  Observed mount = Run("mount-tmpfs", "mount -t tmpfs none mnt && umount mnt");
  if (Confined()) {
    EXPECT_EQ(userns.exit, 1) << userns.Show();
    EXPECT_TRUE(userns.Says("unshare failed: Operation not permitted")) << userns.Show();
    EXPECT_EQ(mount.exit, 32) << mount.Show();
    // mount(8) of a non-root daemon's session (not uid 0 inside) refuses before the syscall.
    EXPECT_TRUE(mount.Says("permission denied") || mount.Says("must be superuser")) << mount.Show();
  } else if (::geteuid() == 0) {
    EXPECT_EQ(userns.exit, 0) << userns.Show();
    EXPECT_EQ(mount.exit, 0) << mount.Show();
  }
}

TEST_P(EscapeTest, SyscallProbesAreRefused) {
  // ptybox-sandbox-probe (tests/sandbox) from inside the session: one line per probe.
  const std::map<std::string, std::string> confined = {{"clone:newuser", "EPERM"},
                                                       {"unshare", "EPERM"},
                                                       {"setns", "EPERM"},
                                                       {"mount", "EPERM"},
                                                       {"umount2", "EPERM"},
                                                       {"chroot", "EPERM"},
                                                       {"pivot_root", "EPERM"},
                                                       {"ioctl:tiocsti", "EPERM"},
                                                       {"ioctl:tiocsti-high", "EPERM"},
                                                       {"ptrace", "EPERM"},
                                                       {"socket:packet", "EAFNOSUPPORT"},
                                                       {"socket:inet:raw:6", "EPERM"},
                                                       {"socket:inet6:raw:6", "EPERM"},
                                                       {"socket:netlink:raw:12", "EPROTONOSUPPORT"},
                                                       {"fsopen", "ENOSYS"},
                                                       {"open_tree", "ENOSYS"},
                                                       {"socket:unix", "ok"}};
  std::string command = Quote(workspace() / ".escape" / "ptybox-sandbox-probe");
  for (const auto& [spec, result] : confined) command += " " + spec;
  Observed o = Run("syscall-probes", command);
  EXPECT_EQ(o.exit, 0) << o.Show();
  std::map<std::string, std::string> seen = ProbeResults(o.text);
  for (const auto& [spec, result] : confined) {
    ASSERT_TRUE(seen.contains(spec)) << spec << ": " << o.Show();
    if (Confined()) {
      EXPECT_EQ(seen[spec], result) << spec << ": " << o.Show();
    } else if ((spec == "pivot_root" || spec == "socket:inet:raw:6" ||
                spec == "socket:inet6:raw:6" || spec == "socket:packet" ||
                spec == "socket:netlink:raw:12") &&
               ::geteuid() != 0) {
      // Without CAP_SYS_ADMIN (pivot_root) or CAP_NET_RAW (raw and packet sockets) the kernel
      // itself answers EPERM: no control as an ordinary user.
      std::cout << "  control skipped for " << spec << ": the test does not run as root\n";
    } else if (spec != "socket:unix") {
      // The control: without the filter none of these answers the filter's errno.
      EXPECT_NE(seen[spec], result) << spec << ": " << o.Show();
    }
  }
}

TEST_P(EscapeTest, NoCapabilityIsHeld) {
  Observed o =
      Run("capabilities", "grep -E '^(Cap[A-Za-z]+|NoNewPrivs|Seccomp):' /proc/self/status");
  std::map<std::string, std::string> fields = StatusFields(o.text);
  if (Confined()) {
    for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      EXPECT_EQ(fields[set], "0000000000000000") << set << ": " << o.Show();
    }
    EXPECT_EQ(fields["NoNewPrivs"], "1") << o.Show();
    EXPECT_EQ(fields["Seccomp"], "2") << o.Show();
    // One id inside: 0 for a root daemon (an unprivileged host id outside, never 0: see
    // host_root_test.cc), the daemon's own uid otherwise.
    Observed map = Run("uid-map", "cat /proc/self/uid_map");
    const std::vector<std::string> line = Words(map.text);
    ASSERT_EQ(line.size(), 3u) << map.Show();
    EXPECT_EQ(line[0], std::to_string(::getuid())) << map.Show();
    EXPECT_EQ(line[2], "1") << map.Show();
    if (::geteuid() == 0) {
      EXPECT_NE(line[1], "0") << map.Show();
    }
  } else if (::geteuid() == 0) {
    EXPECT_NE(fields["CapEff"], "0000000000000000") << o.Show();
    EXPECT_EQ(fields["Seccomp"], "0") << o.Show();
  }
}

TEST_P(EscapeTest, DaemonSecretIsNotReadable) {
  Observed env = Run("secret-in-env", "env | grep -c " + secret_);
  EXPECT_EQ(env.text, "0") << env.Show();
  EXPECT_EQ(env.exit, 1) << env.Show();
  Observed scan = Run("secret-in-/proc/*/environ", Probe("environ " + secret_));
  Observed daemon =
      Run("daemon-environ", "tr '\\0' '\\n' < /proc/" + std::to_string(daemon_.pid()) +
                                "/environ | grep -c " + secret_);
  if (Confined()) {
    // pid 1 is ptybox-init, started by bwrap with an empty environment (--clearenv) and
    // non-dumpable, so its environ is not even readable.
    Observed pid1 =
        Run("secret-in-/proc/1/environ", "tr '\\0' '\\n' < /proc/1/environ | grep -c " + secret_);
    EXPECT_EQ(pid1.text, "bash: /proc/1/environ: Permission denied\n0") << pid1.Show();
    EXPECT_EQ(scan.exit, 1) << scan.Show();
    EXPECT_TRUE(scan.Says("environ: absent")) << scan.Show();
    EXPECT_TRUE(daemon.Says("No such file or directory")) << daemon.Show();
  } else {
    // The control: the daemon's environment really holds the secret, and a process that sees
    // host processes can read it.
    EXPECT_EQ(scan.exit, 0) << scan.Show();
    EXPECT_TRUE(scan.Says("/proc/" + std::to_string(daemon_.pid()) + "/environ")) << scan.Show();
    EXPECT_EQ(daemon.text, "2") << daemon.Show();
  }
}

TEST_P(EscapeTest, PythonAndACompilerWork) {
  Observed py = Run("python3", "python3 -c 'import sys; print(\"python\", sys.version_info[0])'");
  EXPECT_EQ(py.exit, 0) << py.Show();
  EXPECT_EQ(py.text, "python 3") << py.Show();
  const std::string binary = "/tmp/ptybox-escape-cc-" + Unique();
  Observed cc = Run("cc", "cc -x c - -o " + binary + " <<< 'int main(void){return 7;}' && " +
                              binary + "; echo \"ran: $?\"; rm -f " + binary);
  EXPECT_EQ(cc.exit, 0) << cc.Show();
  EXPECT_EQ(cc.text, "ran: 7") << cc.Show();
}

INSTANTIATE_TEST_SUITE_P(Modes, EscapeTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
