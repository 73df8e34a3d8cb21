// Per-session limits through the real binary (docs/security.md, "Resource limits"), in both
// confined modes: a fork bomb under the default task cap stays under it while the daemon keeps
// serving another session; closing the bombed session ends every task; a 1 GiB allocation
// under maxMemoryBytes 256 MiB fails inside the session, which stays usable; a CPU loop under
// maxCpuMillicores is throttled (the cgroup's own counters say so).
//
// Safety: this machine is shared. Every case that provokes exhaustion runs with the test
// process, and so the daemon it starts, inside a protective cgroup this test creates first
// beneath its own (pids.max 4096, memory 2 GiB); the bomb is bounded by `timeout -s KILL` as
// well as by close. Where no protective cgroup can be made (an unprivileged user without a
// delegated subtree, a host without the v1 controllers) the cases skip and say why.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sandbox/cgroup_layout.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
namespace cg = ::ptybox::sandbox::cgroups;
using Clock = std::chrono::steady_clock;

std::string Slurp(const fs::path& path) { return ptybox::testing::ReadFile(path); }

bool Put(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// A number in a cgroup file ("123\n") or after `key ` in a keyed one ("max 7").
std::optional<int64_t> Number(const fs::path& path, const std::string& key = "") {
  std::istringstream in(Slurp(path));
  if (key.empty()) {
    int64_t n = 0;
    if (in >> n) return n;
    return std::nullopt;
  }
  for (std::string k; in >> k;) {
    int64_t n = 0;
    if (!(in >> n)) break;
    if (k == key) return n;
  }
  return std::nullopt;
}

// This process's own cgroup in the v1 hierarchy of `controller`.
std::optional<fs::path> Own(pid_t pid, std::string_view controller) {
  return cg::OwnDirectory(cg::ParseProcCgroup(Slurp("/proc/" + std::to_string(pid) + "/cgroup")),
                          cg::ParseCgroupMounts(Slurp("/proc/self/mountinfo")), controller);
}

// The protective cgroup: the test process (and so every daemon it starts) inside
// `<own>/ptybox-limits-test-<pid>` in the v1 pids and memory hierarchies. Made once; left and
// removed at exit (anything still inside is killed first).
class Protection final {
 public:
  static Protection& Get() {
    static Protection protection;
    return protection;
  }
  [[nodiscard]] bool ok() const { return why_.empty(); }
  [[nodiscard]] const std::string& why() const { return why_; }

  ~Protection() {
    const std::string self = std::to_string(::getpid());
    for (const auto& [dir, home] : made_) {
      (void)Put(home / "cgroup.procs", self);
      (void)Put(dir / "pids.max", "0");  // harmless where the file does not exist
      for (int round = 0; round < 100; ++round) {
        std::istringstream pids(Slurp(dir / "cgroup.procs"));
        bool any = false;
        for (pid_t pid; pids >> pid;) {
          any = true;
          ::kill(pid, SIGKILL);
        }
        if (!any) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::rmdir(dir.c_str());
    }
  }

 private:
  Protection() {
    const std::string name = "ptybox-limits-test-" + std::to_string(::getpid());
    const std::pair<std::string_view, std::pair<std::string, std::string>> caps[] = {
        {"pids", {"pids.max", "4096"}},
        {"memory", {"memory.limit_in_bytes", std::to_string(int64_t{2} << 30)}},
    };
    for (const auto& [controller, cap] : caps) {
      std::optional<fs::path> own = Own(::getpid(), controller);
      if (!own) {
        why_ = "no cgroup v1 " + std::string(controller) +
               " hierarchy holds this process (the protective cgroup needs one)";
        return;
      }
      const fs::path dir = *own / name;
      if (::mkdir(dir.c_str(), 0755) != 0) {
        why_ = "cannot create the protective cgroup " + dir.string() + ": " + std::strerror(errno) +
               " (an unprivileged user without a delegated cgroup)";
        return;
      }
      made_.emplace_back(dir, *own);
      if (!Put(dir / cap.first, cap.second) ||
          !Put(dir / "cgroup.procs", std::to_string(::getpid()))) {
        why_ = "cannot set up the protective cgroup " + dir.string();
        return;
      }
    }
    std::cout << "  protective cgroups: pids.max 4096, memory 2 GiB (";
    for (const auto& [dir, home] : made_) std::cout << dir.string() << " ";
    std::cout << ")\n";
  }

  std::string why_;
  std::vector<std::pair<fs::path, fs::path>> made_;  // (protective cgroup, where we came from)
};

// The daemon's session cgroup number `n` (s<n>) in the hierarchy of `controller` (v1, else v2).
std::optional<fs::path> SessionCgroup(pid_t daemon, std::string_view controller, int n) {
  for (std::string_view hierarchy : {controller, std::string_view()}) {
    std::optional<fs::path> own = Own(daemon, hierarchy);
    if (!own) continue;
    std::error_code ec;
    const std::string prefix = "ptybox-" + std::to_string(daemon) + "-";
    for (const fs::directory_entry& e : fs::directory_iterator(*own, ec)) {
      if (!e.path().filename().string().starts_with(prefix)) continue;
      const fs::path session = e.path() / ("s" + std::to_string(n));
      const std::string probe = controller == "pids"     ? "pids.current"
                                : controller == "memory" ? "cgroup.procs"
                                                         : "cpu.stat";
      if (fs::exists(session / probe, ec)) return session;
    }
  }
  return std::nullopt;
}

std::string Viewport(const Json& sent) {
  return sent.contains("viewport") ? sent["viewport"].get<std::string>() : sent.dump();
}

class LimitsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!Protection::Get().ok()) {
      GTEST_SKIP() << "the exhaustion cases never run bare: " << Protection::Get().why();
    }
  }
  const std::string& Mode() const { return GetParam(); }

  // A daemon with `policy` as its operator file (empty: no policy at all).
  static Daemon::Options WithPolicy(const TempDir& dir, const std::string& policy) {
    if (policy.empty()) return {};
    const fs::path file = dir.path() / "operator.yaml";
    Put(file, policy);
    return Daemon::Options{{"--policy", file.string()}, {}};
  }
};

TEST_P(LimitsTest, ForkBombIsHeldByTheDefaultCapAndCloseEndsEveryTask) {
  Daemon daemon;  // no policy: the default maxTasks 1024
  RpcClient client(daemon.socket());
  const std::string bombed = OpenSession(client, Mode());
  const std::string other = OpenSession(client, Mode());
  ASSERT_FALSE(bombed.empty());
  ASSERT_FALSE(other.empty());
  const std::optional<fs::path> cgroup = SessionCgroup(daemon.pid(), "pids", 1);
  ASSERT_TRUE(cgroup) << "no pids cgroup for the session; daemon log:\n" << daemon.Log();
  EXPECT_EQ(Number(*cgroup / "pids.max"), 1024);

  // The bomb runs in the background of the session's shell, bounded by timeout's SIGKILL to
  // its process group (every bomb process stays in it) and by close.
  Json started =
      Send(client, bombed,
           "timeout -s KILL 60 bash -c 'b(){ b | b & }; b; sleep 90' >/dev/null 2>&1 &\n",
           Json{{"timeoutMs", 20000}});
  std::cout << "  [" << Mode() << "] bomb started -> " << started.dump() << "\n";
  // Until the cap refused a fork (pids.events), the highest count seen (hang guard only).
  int64_t peak = 0;
  const auto bomb_start = Clock::now();
  const auto guard = bomb_start + std::chrono::seconds(45);
  while (Clock::now() < guard) {
    peak = std::max(peak, Number(*cgroup / "pids.current").value_or(0));
    if (Number(*cgroup / "pids.events", "max").value_or(0) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int64_t refused = Number(*cgroup / "pids.events", "max").value_or(0);
  peak = std::max(peak, Number(*cgroup / "pids.current").value_or(0));
  std::cout
      << "  [" << Mode() << "] bomb: peak " << peak << " tasks, " << refused
      << " forks refused by pids.max, the first after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - bomb_start).count()
      << " ms\n";
  EXPECT_GT(refused, 0) << "the bomb never reached the cap";
  EXPECT_LE(peak, 1024);
  EXPECT_GT(peak, 100) << "the bomb did not run";

  // The daemon keeps serving: a send on the other session settles normally.
  Json served = Send(client, other, "echo served-$((6*7))\n", Json{{"timeoutMs", 30000}});
  EXPECT_NE(Viewport(served).find("served-42"), std::string::npos) << served.dump();
  EXPECT_EQ(served.value("exitCode", Json()), 0) << served.dump();

  // Close ends every task of the bombed session: once it returns the cgroup is empty (gone).
  const auto before = Clock::now();
  Json closed = client.Call("terminal_close", Json{{"sessionId", bombed}});
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - before);
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  std::error_code ec;
  const bool gone = !fs::exists(*cgroup, ec);
  const int64_t left = gone ? 0 : Number(*cgroup / "pids.current").value_or(-1);
  std::cout << "  [" << Mode() << "] close took " << took.count() << " ms; cgroup "
            << (gone ? "removed" : "still there with " + std::to_string(left) + " tasks") << "\n";
  EXPECT_EQ(left, 0);
  // And the other session is untouched.
  Json again = Send(client, other, "echo still-$((2+3))\n", Json{{"timeoutMs", 30000}});
  EXPECT_NE(Viewport(again).find("still-5"), std::string::npos) << again.dump();
}

TEST_P(LimitsTest, MemoryHogFailsUnderMaxMemoryBytesAndTheSessionStaysUsable) {
  TempDir dir;
  Daemon daemon(WithPolicy(
      dir, "version: 1\nlimits:\n  maxMemoryBytes: 268435456\n  idleSilenceMs: 60000\n"));
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty());
  const std::optional<fs::path> cgroup = SessionCgroup(daemon.pid(), "memory", 1);
  ASSERT_TRUE(cgroup) << "no memory cgroup for the session; daemon log:\n" << daemon.Log();
  const auto limit = Number(*cgroup / "memory.limit_in_bytes");
  const auto limit_v2 = Number(*cgroup / "memory.max");
  EXPECT_TRUE(limit == 268435456 || limit_v2 == 268435456);

  // 1 GiB, touched (bytes repetition writes every page); prints its size in MiB on success.
  Json hog = Send(client, session,
                  "python3 -c 'b = b\"x\" * (1 << 30); print(\"size\", len(b) >> 20)'; "
                  "echo hog-rc=$?\n",
                  Json{{"timeoutMs", 60000}});
  const std::string text = Viewport(hog);
  std::cout << "  [" << Mode() << "] hog -> " << hog.dump() << "\n";
  EXPECT_EQ(text.find("size 1024"), std::string::npos) << text;
  EXPECT_NE(text.find("hog-rc="), std::string::npos) << text;
  EXPECT_EQ(text.find("hog-rc=0"), std::string::npos) << text;
  const auto failcnt = Number(*cgroup / "memory.failcnt");
  const auto oom_kills = Number(*cgroup / "memory.oom_control", "oom_kill");
  const auto oom_kills_v2 = Number(*cgroup / "memory.events", "oom_kill");
  std::cout << "  [" << Mode() << "] memory.failcnt " << failcnt.value_or(-1) << ", oom_kill "
            << oom_kills.value_or(oom_kills_v2.value_or(-1)) << "\n";
  // The kernel ended it inside the session's own cgroup (v1 oom_control, v2 memory.events).
  EXPECT_GT(oom_kills.value_or(oom_kills_v2.value_or(0)), 0);

  // The session stays usable.
  Json after = Send(client, session, "echo alive-$((2+3))\n", Json{{"timeoutMs", 30000}});
  EXPECT_NE(Viewport(after).find("alive-5"), std::string::npos) << after.dump();
  EXPECT_EQ(after.value("exitCode", Json()), 0) << after.dump();
}

TEST_P(LimitsTest, CpuLoopIsThrottledUnderMaxCpuMillicores) {
  TempDir dir;
  Daemon daemon(WithPolicy(dir, "version: 1\nlimits:\n  maxCpuMillicores: 100\n"));
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty());
  const std::optional<fs::path> cgroup = SessionCgroup(daemon.pid(), "cpu", 1);
  ASSERT_TRUE(cgroup) << "no cpu cgroup for the session; daemon log:\n" << daemon.Log();
  const auto quota = Number(*cgroup / "cpu.cfs_quota_us");
  std::cout << "  [" << Mode() << "] cpu quota " << quota.value_or(-1) << " us per "
            << Number(*cgroup / "cpu.cfs_period_us").value_or(-1) << " us\n";

  Json spun = Send(client, session, "timeout 2 sh -c 'while :; do :; done'; echo spun-$?\n",
                   Json{{"timeoutMs", 60000}});
  EXPECT_NE(Viewport(spun).find("spun-124"), std::string::npos) << spun.dump();
  const auto periods = Number(*cgroup / "cpu.stat", "nr_throttled");
  const auto throttled_us = Number(*cgroup / "cpu.stat", "throttled_usec");
  const auto throttled_ns = Number(*cgroup / "cpu.stat", "throttled_time");
  std::cout << "  [" << Mode() << "] cpu.stat nr_throttled " << periods.value_or(-1)
            << ", throttled "
            << (throttled_us ? *throttled_us : throttled_ns.value_or(-1000) / 1000) << " us\n";
  EXPECT_GT(periods.value_or(0), 0) << Slurp(*cgroup / "cpu.stat");
}

// Without cgroup.kill (PTYBOX_SESSION_CGROUPS=v1: only the v1 hierarchies, as on a v1 host)
// close ends the session by pids.max 0 and SIGKILL rounds over cgroup.procs: a small bomb at its
// cap (maxTasks 64) plus processes that left the tree (setsid, double fork) all end.
TEST_P(LimitsTest, CloseWithoutCgroupKillEndsEveryTaskThroughTheV1PidsCgroup) {
  TempDir dir;
  Daemon::Options options = WithPolicy(dir, "version: 1\nlimits:\n  maxTasks: 64\n");
  options.env.push_back("PTYBOX_SESSION_CGROUPS=v1");
  Daemon daemon(options);
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty());
  const std::optional<fs::path> cgroup = SessionCgroup(daemon.pid(), "pids", 1);
  ASSERT_TRUE(cgroup) << "no pids cgroup for the session; daemon log:\n" << daemon.Log();
  ASSERT_FALSE(fs::exists(cgroup->parent_path().parent_path() / "cgroup.kill"));  // v1 indeed
  EXPECT_EQ(Number(*cgroup / "pids.max"), 64);
  Json started =
      Send(client, session,
           "(setsid sleep 7771 >/dev/null 2>&1 &); (setsid sh -c 'sleep 7772 & sleep 7773' "
           ">/dev/null 2>&1 &); timeout -s KILL 60 bash -c 'b(){ b | b & }; b; sleep 90' "
           ">/dev/null 2>&1 &\n",
           Json{{"timeoutMs", 20000}});
  std::cout << "  [" << Mode() << ", v1] started -> " << started.dump() << "\n";
  const auto guard = Clock::now() + std::chrono::seconds(45);
  while (Clock::now() < guard && Number(*cgroup / "pids.events", "max").value_or(0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int64_t before = Number(*cgroup / "pids.current").value_or(-1);
  std::cout << "  [" << Mode() << ", v1] " << before << " tasks at the cap, "
            << Number(*cgroup / "pids.events", "max").value_or(0) << " forks refused\n";
  EXPECT_GT(Number(*cgroup / "pids.events", "max").value_or(0), 0);
  EXPECT_LE(before, 64);
  const auto start = Clock::now();
  Json closed = client.Call("terminal_close", Json{{"sessionId", session}});
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  std::error_code ec;
  const bool gone = !fs::exists(*cgroup, ec);
  std::cout << "  [" << Mode() << ", v1] close took " << took.count() << " ms; cgroup "
            << (gone ? "removed" : "left: " + Slurp(*cgroup / "cgroup.procs")) << "\n";
  EXPECT_TRUE(gone);
}

INSTANTIATE_TEST_SUITE_P(ConfinedModes, LimitsTest,
                         ::testing::Values("read-only", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
