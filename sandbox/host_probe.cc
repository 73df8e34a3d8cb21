// The host probes behind sandbox_unavailable and `ptybox doctor`. Each probe checks one thing
// for real (files, sysctls, a forked child, a tiny bwrap sandbox) and names the fix; child
// processes run with a hard timeout and their stderr captured.
#include "sandbox/host_probe.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "common/errno_name.h"
#include "policy/mode.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/captured_run.h"
#include "sandbox/container_env.h"
#include "sandbox/init/child_exec.h"
#include "sandbox/init/landlock.h"
#include "sandbox/mount_stage.h"
#include "sandbox/seccomp_filter.h"
#include "sandbox/user_namespace.h"

namespace ptybox::sandbox {
namespace {

using namespace std::chrono_literals;

constexpr auto kChildTimeout = 10s;
constexpr size_t kMaxCapture = 64 * 1024;

constexpr std::string_view kInstallFix =
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Alpine: apk add bubblewrap), or set PTYBOX_BWRAP to the path of a bwrap binary";

// ---- Child processes ------------------------------------------------------------------------

// Runs argv[0] (an absolute path, no PATH search) to its end with a hard timeout, capturing
// stdout and stderr. `keep_fd` (when >= 0) is inherited at the same number. `stage` (when set)
// is entered in the child first, as the launcher does (mount_stage.h).
CapturedRun RunChild(const std::vector<std::string>& argv, int keep_fd = -1,
                     StagePlan* stage = nullptr) {
  CaptureOptions options;
  options.timeout = kChildTimeout;
  options.max_capture = kMaxCapture;
  if (keep_fd >= 0) options.keep_fds.push_back(keep_fd);
  if (stage != nullptr) {
    // EnterStage says why on stderr (captured: the hints below read it).
    options.before_exec = [stage]() -> std::optional<ChildFailure> {
      if (EnterStage(*stage, STDERR_FILENO)) return std::nullopt;
      return ChildFailure{ChildStage::kMountStage, 0};
    };
  }
  return RunCaptured(argv, options);
}

// What stopped a program from running, for a probe's detail.
std::string WhyNotRun(const std::string& path, const ChildFailure& failure) {
  if (failure.stage == ChildStage::kExec) {
    return "cannot execute " + path + ": " + std::strerror(failure.err);
  }
  return "cannot start " + path + ": " + DescribeChildFailure(failure);
}

// Forks a child that runs `body` (async-signal-safe calls only) and exits with its value;
// returns that value, or -1 when the child could not run or died.
int RunInForkedChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) _exit(body());
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---- Host facts -----------------------------------------------------------------------------

std::optional<std::string> ReadSysctl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string value;
  std::getline(in, value);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\n')) value.pop_back();
  return value;
}

// A field of /proc/self/status ("Seccomp", "Seccomp_filters"), or nullopt.
std::optional<std::string> StatusField(std::string_view name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ':') {
      const size_t start = line.find_first_not_of(" \t", name.size() + 1);
      return start == std::string::npos ? std::string() : line.substr(start);
    }
  }
  return std::nullopt;
}

bool HasEffectiveSysAdmin() {
  cap_t caps = cap_get_proc();
  if (caps == nullptr) return false;
  cap_flag_value_t value = CAP_CLEAR;
  const bool has =
      cap_get_flag(caps, CAP_SYS_ADMIN, CAP_EFFECTIVE, &value) == 0 && value == CAP_SET;
  cap_free(caps);
  return has;
}

// Printable, bounded, single-spaced text from a child's stderr (hostile input).
std::string Sanitize(std::string_view text, size_t max = 600) {
  std::string out;
  for (char c : text) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\t' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else if (u < 0x20 || u == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// What a line of bwrap's stderr means, and what to change.
struct StderrHint {
  std::string_view needle;
  std::string_view cause;
  std::string_view fix;
  std::string (*fix_here)() = nullptr;  // instead of `fix`: worded for where ptybox runs

  [[nodiscard]] std::string Fix() const {
    return fix_here != nullptr ? fix_here() : std::string(fix);
  }
};

constexpr StderrHint kStderrHints[] = {
    {"uid map",
     "user namespaces are not usable: bwrap could not map its user into one",
     {},
     &UserNamespaceFix},
    {"No permissions to create",
     "user namespaces are not allowed for this user",
     {},
     &UserNamespaceFix},
    {"Creating new namespace failed",
     "the kernel or a seccomp filter refused to create namespaces",
     {},
     &SeccompFix},
    {"Can't mount proc",
     "a new /proc cannot be mounted: the host's /proc has masked parts (a container runtime's "
     "default)",
     {},
     &ProcMaskFix},
    {"pivot_root",
     "bubblewrap could not pivot_root into the sandbox's new root",
     {},
     &PivotRootFix},
    {"Can't mount devpts", "a private devpts instance cannot be mounted",
     "allow mounting devpts in the user namespace (a container runtime or LSM refuses it; "
     "--privileged)"},
    {"RTM_NEWADDR", "the loopback interface of the new network namespace cannot be set up",
     "allow network namespaces (a container runtime's seccomp profile or missing "
     "CAP_NET_ADMIN in the user namespace)"},
    {"seccomp", "the kernel refused the seccomp filter",
     "use a kernel with CONFIG_SECCOMP_FILTER, and do not stack an outer filter that denies "
     "seccomp()"},
    {"Can't find source path",
     "a path the policy mounts does not exist on the host (workspace, writable root or "
     "ptybox-init)",
     "create the path or remove it from the policy's writable roots"},
    {"Can't chdir", "the session's working directory is not visible inside the sandbox",
     "choose a cwd inside the workspace or another path the sandbox can see"},
    {"execvp", "ptybox-init could not be executed inside the sandbox",
     "reinstall ptybox so that ptybox-init sits next to the ptybox binary"},
    {"ptybox-launch: refusing to bind",
     "a path changed between its check and its bind (a directory was swapped with a link)",
     "nothing to change on the host: a process is racing the sandbox's roots; the session was "
     "refused instead of binding something else"},
    {"ptybox-launch: unshare(CLONE_NEWUSER",
     "the launcher could not create its own user namespace (needed to stage the binds)",
     {},
     &UserNamespaceFix},
    {"ptybox-launch: dropping to the session uid",
     "the root daemon could not switch to the session's unprivileged host id",
     "run the daemon as real root (CAP_SETUID, CAP_SETGID), or as an ordinary user"},
    {"ptybox-launch:", "the launcher could not stage the session's binds",
     "run `ptybox doctor`; the staging needs Linux 5.12+ with open_tree, move_mount and "
     "(for a root daemon) idmapped mounts"},
    {"Unexpected capabilities but not setuid",
     "bwrap has file capabilities but is not setuid, which it refuses",
     "remove the file capabilities (setcap -r) from the bwrap binary"},
};

const StderrHint* MatchHint(std::string_view bwrap_stderr) {
  for (const StderrHint& hint : kStderrHints) {
    if (bwrap_stderr.find(hint.needle) != std::string_view::npos) return &hint;
  }
  return nullptr;
}

// "bubblewrap 0.8.0" -> {0, 8, 0}.
std::optional<std::array<int, 3>> ParseVersion(std::string_view text) {
  const size_t at = text.find("bubblewrap ");
  if (at == std::string_view::npos) return std::nullopt;
  std::array<int, 3> version{0, 0, 0};
  std::istringstream in(std::string(text.substr(at + 11)));
  char dot = 0;
  if (!(in >> version[0])) return std::nullopt;
  if (in >> dot >> version[1]) {
    if (!(in >> dot >> version[2])) version[2] = 0;
  }
  return version;
}

// ---- The probes -----------------------------------------------------------------------------

class Prober final {
 public:
  explicit Prober(std::filesystem::path bwrap) : bwrap_(std::move(bwrap)) {}

  // Runs the probes in order; stops at the first failure when `stop_at_failure`.
  std::vector<ProbeResult> Run(bool stop_at_failure) {
    using Step = ProbeResult (Prober::*)();
    static constexpr Step kSteps[] = {&Prober::ProbeBwrap,       &Prober::ProbeUserNamespaces,
                                      &Prober::ProbeSeccomp,     &Prober::ProbeSeccompFilter,
                                      &Prober::ProbeSessionUids, &Prober::ProbeSandboxStart,
                                      &Prober::ProbeSandboxPty,  &Prober::ProbeNoHostRoot};
    std::vector<ProbeResult> results;
    for (Step step : kSteps) {
      results.push_back((this->*step)());
      if (stop_at_failure && !results.back().ok) break;
    }
    return results;
  }

 private:
  static ProbeResult Ok(std::string name, std::string detail) {
    return {std::move(name), true, std::move(detail), {}};
  }
  static ProbeResult Failed(std::string name, std::string detail, std::string_view fix) {
    return {std::move(name), false, std::move(detail), std::string(fix)};
  }

  ProbeResult ProbeBwrap() {
    const std::string name = "bwrap";
    const std::string path = bwrap_.string();
    if (bwrap_.empty()) return Failed(name, "no bwrap path was given", kInstallFix);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      return Failed(name, "no bwrap at " + path + " (" + std::strerror(errno) + ")", kInstallFix);
    }
    if (!S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0) {
      return Failed(name, path + " is not an executable file", kInstallFix);
    }
    const CapturedRun version = RunChild({path, "--version"});
    std::string detail = path;
    if (st.st_mode & S_ISUID) detail += " (setuid)";
    if (version.failure) return Failed(name, WhyNotRun(path, *version.failure), kInstallFix);
    runnable_ = true;
    if (auto parsed = ParseVersion(version.out)) {
      detail += ": " + Sanitize(version.out, 80);
      // --clearenv, which keeps the daemon's environment out of the sandbox, arrived in 0.5.0.
      if ((*parsed)[0] == 0 && (*parsed)[1] < 5) {
        runnable_ = false;
        return Failed(name, detail + ", older than 0.5.0 (no --clearenv)",
                      "upgrade bubblewrap to 0.5.0 or later");
      }
    } else {
      detail += " (version unknown: --version printed '" +
                Sanitize(version.out + version.err, 120) + "')";
    }
    return Ok(name, detail);
  }

  ProbeResult ProbeUserNamespaces() {
    const std::string name = "user-namespaces";
    const bool privileged = HasEffectiveSysAdmin();
    std::string detail;
    const auto max = ReadSysctl("/proc/sys/user/max_user_namespaces");
    if (!max) {
      return Failed(name,
                    "/proc/sys/user/max_user_namespaces is missing: the kernel has no user "
                    "namespaces",
                    "use a kernel built with CONFIG_USER_NS=y");
    }
    if (*max == "0") {
      return Failed(name, "user.max_user_namespaces is 0",
                    HostSysctlFix("sysctl -w user.max_user_namespaces=15000 (persist it in "
                                  "/etc/sysctl.d/)"));
    }
    detail = "user.max_user_namespaces=" + *max;
    if (auto clone = ReadSysctl("/proc/sys/kernel/unprivileged_userns_clone")) {
      detail += ", kernel.unprivileged_userns_clone=" + *clone;
      if (*clone == "0" && !privileged) {
        return Failed(name, detail + " and ptybox is not privileged",
                      HostSysctlFix("sysctl -w kernel.unprivileged_userns_clone=1 (persist it "
                                    "in /etc/sysctl.d/), or run the daemon as root"));
      }
    }
    if (auto apparmor = ReadSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")) {
      detail += ", kernel.apparmor_restrict_unprivileged_userns=" + *apparmor;
      if (*apparmor == "1" && !privileged) {
        return Failed(name, detail + " and ptybox is not privileged",
                      HostSysctlFix("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, "
                                    "or an AppArmor profile that grants bwrap 'userns' (Ubuntu: "
                                    "the bwrap-userns-restrict profile)"));
      }
    }
    detail += privileged ? " (CAP_SYS_ADMIN held)" : " (unprivileged)";

    // For real: a child creates a user namespace and maps its own uid, as bwrap does.
    const std::string map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
    const int rc = RunInForkedChild([&map]() -> int {
      if (unshare(CLONE_NEWUSER) != 0) return errno == EPERM ? 101 : (errno == ENOSPC ? 102 : 103);
      const int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
      if (fd < 0) return 104;
      const bool wrote = write(fd, map.data(), map.size()) == static_cast<ssize_t>(map.size());
      close(fd);
      return wrote ? 0 : 104;
    });
    unshare_errno_ = 0;
    switch (rc) {
      case 0:
        return Ok(name, detail + "; unshare(CLONE_NEWUSER) and a uid map work");
      case 101:
        unshare_errno_ = EPERM;
        break;
      case 102:
        unshare_errno_ = ENOSPC;
        break;
      case 104:
        return Failed(name,
                      detail +
                          "; unshare(CLONE_NEWUSER) works but writing the uid map is "
                          "refused (a security module strips the namespace's capabilities)",
                      UserNamespaceFix());
      default:
        return Failed(name, detail + "; a test child could not create a user namespace",
                      UserNamespaceFix());
    }
    if (unshare_errno_ == EPERM && StatusField("Seccomp").value_or("0") == "2") {
      // Blame the seccomp filter, in the next probe.
      return Ok(name, detail +
                          "; unshare(CLONE_NEWUSER) is refused with EPERM under a seccomp "
                          "filter (see the seccomp probe)");
    }
    if (unshare_errno_ == ENOSPC) {
      return Failed(name,
                    detail +
                        "; unshare(CLONE_NEWUSER) failed with ENOSPC: the limit of "
                        "user namespaces is reached",
                    HostSysctlFix("raise user.max_user_namespaces (sysctl -w "
                                  "user.max_user_namespaces=15000)"));
    }
    return Failed(name,
                  detail + "; unshare(CLONE_NEWUSER) failed with " + ErrnoName(unshare_errno_) +
                      " (a security module or a container runtime refuses "
                      "user namespaces, or the process is chrooted)",
                  UserNamespaceFix());
  }

  ProbeResult ProbeSeccomp() {
    const std::string name = "seccomp";
    const auto mode = StatusField("Seccomp");
    if (!mode) {
      return Failed(name, "/proc/self/status has no Seccomp field: the kernel has no seccomp",
                    "use a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y");
    }
    if (*mode == "0") return Ok(name, "ptybox itself runs under no seccomp filter");
    if (*mode == "1") {
      return Failed(name, "ptybox runs in strict seccomp mode",
                    "run ptybox without seccomp strict mode");
    }
    const std::string filters = StatusField("Seccomp_filters").value_or("?");
    if (unshare_errno_ == EPERM) {
      return Failed(
          name,
          "ptybox runs under " + filters +
              " seccomp filter(s) that refuse "
              "unshare(CLONE_NEWUSER) with EPERM (Docker's default profile does; Podman's "
              "allows namespaces)",
          SeccompFix());
    }
    return Ok(name, "ptybox runs under " + filters + " seccomp filter(s) that allow namespaces");
  }

  ProbeResult ProbeSeccompFilter() {
    const std::string name = "seccomp-filter";
    auto program = BuildSeccompProgram({});
    if (!program) {
      return Failed(name, program.error().Describe(),
                    "install a libseccomp that knows this architecture (libseccomp2 2.5 or later)");
    }
    // Load it for real in a child: the kernel must accept the exported program.
    std::string bytes(64 * 1024, '\0');
    const ssize_t n = pread(program->Get(), bytes.data(), bytes.size(), 0);
    if (n <= 0 || n % static_cast<ssize_t>(sizeof(sock_filter)) != 0) {
      return Failed(name, "the exported seccomp program is unreadable", "report a ptybox bug");
    }
    sock_fprog fprog{static_cast<unsigned short>(n / static_cast<ssize_t>(sizeof(sock_filter))),
                     reinterpret_cast<sock_filter*>(bytes.data())};
    const int rc = RunInForkedChild([&fprog]() -> int {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 101;
      if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) return 102;
      return 0;
    });
    if (rc != 0) {
      return Failed(name, "the kernel refused to load ptybox's seccomp filter",
                    "use a kernel built with CONFIG_SECCOMP_FILTER=y");
    }
    program_ok_ = true;
    return Ok(name, "ptybox's filter (" + std::to_string(fprog.len) +
                        " BPF instructions) loads in a child");
  }

  // A root daemon runs confined sessions as an unprivileged id of `sessionIds`: the range must
  // be free on this host (checked against the default range; the launcher checks the policy's).
  ProbeResult ProbeSessionUids() {
    const std::string name = "session-ids";
    if (!RunsAsHostRoot()) {
      return Ok(name, "the daemon is not root: sessions run as its own uid " +
                          std::to_string(::geteuid()) + ", mapped 1:1");
    }
    const policy::SessionUidRange range;
    if (std::optional<std::string> conflict = SessionUidRangeConflictOnHost(range)) {
      return Failed(name, *conflict,
                    "set `sessionIds: {first: N, count: M}` in the operator policy to a range no "
                    "user, group or /etc/subuid entry uses");
    }
    return Ok(name, "root daemon: confined sessions run as host ids " +
                        std::to_string(range.first.value()) + "-" +
                        std::to_string(range.End() - 1) +
                        " (the default `sessionIds`), never as root");
  }

  // The uid the sandbox's processes hold, read from inside: with a root daemon, no id of the
  // sandbox may map to host uid 0 (the launcher's idmapped, unprivileged path really works).
  ProbeResult ProbeNoHostRoot() {
    if (!RunsAsHostRoot()) {
      return Ok("no-host-root", "the daemon is not root: sessions cannot hold host root");
    }
    return RunTinySandbox(
        "no-host-root", "/bin/sh",
        {"-c",
         "while read -r a b c; do [ \"$b\" = 0 ] && exit 1; done < /proc/self/uid_map; "
         "test -d /usr/bin"},
        "a sandbox of a root daemon maps no id to host uid 0 and reads its idmapped root");
  }

  ProbeResult ProbeSandboxStart() {
    return RunTinySandbox("sandbox-start", "/bin/true", {},
                          "bwrap ran /bin/true in new user, pid, network, ipc, uts and mount "
                          "namespaces with private /dev, /proc, /tmp and the seccomp filter");
  }

  ProbeResult ProbeSandboxPty() {
    return RunTinySandbox(
        "sandbox-pty", "/bin/sh", {"-c", "exec 3<>/dev/ptmx && test -c /dev/pts/0"},
        "a process in the sandbox opened /dev/ptmx and got /dev/pts/0 of its own devpts");
  }

  ProbeResult RunTinySandbox(const std::string& name, const std::filesystem::path& program,
                             std::vector<std::string> args, const std::string& success) {
    if (!runnable_) return Failed(name, "not run: bwrap is not usable", kInstallFix);
    if (!program_ok_) {
      return Failed(name, "not run: the seccomp filter is not usable",
                    "fix the seccomp-filter probe first");
    }
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::canonical(program, ec);
    if (ec) {
      return Failed(name, "not run: " + program.string() + " is missing on this host",
                    "install coreutils and a POSIX sh");
    }
    auto seccomp = BuildSeccompProgram({});
    if (!seccomp) return Failed(name, seccomp.error().Describe(), "report a ptybox bug");

    // The daemon's argv with a harmless workspace (never "/": binding the host root again
    // would cover the private /dev, /proc and /tmp).
    SandboxSpec spec;
    spec.mode = policy::Mode::kReadOnly;
    spec.workspace_root = "/usr";
    spec.cwd = "/";
    // Staged as the launcher stages a session: the same namespaces, ids and idmapped binds.
    Result<StagePlan> stage = PrepareStage(spec, resolved, RunsAsHostRoot(), {}, {});
    if (!stage) {
      return Failed(name, stage.error().message,
                    "see the message; the launcher stages every bind this way");
    }
    BwrapInvocation invocation{bwrap_, seccomp->Get(), resolved, std::move(args)};
    const CapturedRun child = RunChild(BuildBwrapArgv(spec, invocation), seccomp->Get(), &*stage);
    if (child.Succeeded()) return Ok(name, success);

    std::string detail;
    if (child.failure) {
      detail = WhyNotRun(bwrap_.string(), *child.failure);
    } else if (child.timed_out) {
      detail = "the sandbox did not finish within 10 s";
    } else if (child.exited) {
      detail = "bwrap exited with status " + std::to_string(child.exit_code);
    } else {
      detail = "bwrap was killed by signal " + std::to_string(child.signal);
    }
    if (!child.err.empty()) detail += "; bwrap said: \"" + Sanitize(child.err) + "\"";
    if (const StderrHint* hint = MatchHint(child.err)) {
      return Failed(name, detail + " (cause: " + std::string(hint->cause) + ")", hint->Fix());
    }
    return Failed(name, detail,
                  "run `ptybox doctor` and the failing bwrap command by hand to see what the "
                  "host refuses");
  }

  std::filesystem::path bwrap_;
  bool runnable_ = false;
  bool program_ok_ = false;
  int unshare_errno_ = 0;
};

constexpr std::string_view kNoFallback =
    " ptybox never falls back to running without a sandbox; danger-full-access (no sandbox at "
    "all) is only ever an explicit operator choice in the policy.";

}  // namespace

std::vector<ProbeResult> ProbeHost(const std::filesystem::path& bwrap) {
  return Prober(bwrap).Run(/*stop_at_failure=*/false);
}

ProbeResult ProbeUnixSocketWalls() {
  ProbeResult result;
  result.name = "unix-sockets";
  Result<int> abi = LandlockAbi();
  if (!abi) {
    result.detail = "the Landlock ABI could not be read: " + abi.error().Describe();
    result.fix = "boot with Landlock enabled (lsm=...,landlock)";
    return result;
  }
  const UnixSocketWalls walls = UnixSocketWallsFor(*abi);
  result.ok = walls.Complete();
  result.detail = DescribeUnixSocketWalls(walls);
  if (!result.ok) {
    result.fix = "a kernel with Landlock ABI 9 (Linux 7.1 or later) and Landlock enabled at boot";
  }
  return result;
}

Result<void> RequireSandbox(const std::filesystem::path& bwrap) {
  const std::vector<ProbeResult> results = Prober(bwrap).Run(/*stop_at_failure=*/true);
  const ProbeResult& last = results.back();
  if (last.ok) return {};
  return Fail(ErrorKind::kSandboxUnavailable,
              "Sandboxing is unavailable on this host (probe " + last.name + "): " + last.detail +
                  ". Fix: " + last.fix + "." + std::string(kNoFallback),
              bwrap.string());
}

Error DiagnoseSandboxFailure(const std::filesystem::path& bwrap, std::string_view bwrap_stderr) {
  const std::string said = Sanitize(bwrap_stderr);
  const std::vector<ProbeResult> results = Prober(bwrap).Run(/*stop_at_failure=*/true);
  const ProbeResult& last = results.back();
  std::string cause;
  if (!last.ok) {
    cause = "Cause (probe " + last.name + "): " + last.detail + ". Fix: " + last.fix + ".";
  } else if (const StderrHint* hint = MatchHint(bwrap_stderr)) {
    cause = "Cause: " + std::string(hint->cause) + ". Fix: " + hint->Fix() + ".";
  } else {
    cause =
        "Every host probe of `ptybox doctor` passes, so the cause is specific to this session: "
        "check that the workspace, the writable roots and the working directory exist and are "
        "directories.";
  }
  std::string message = "The sandbox could not start";
  // The probe may have seen the very same message; say it once.
  if (!said.empty() && cause.find(said) == std::string::npos) {
    message += "; bwrap said: \"" + said + "\"";
  }
  message += ". " + cause + std::string(kNoFallback);
  return Error{ErrorKind::kSandboxUnavailable, std::move(message), bwrap.string()};
}

std::filesystem::path FindBwrap() {
  if (const char* env = std::getenv("PTYBOX_BWRAP"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest(path);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      // Relative entries (including the empty one, meaning ".") are never trusted.
      if (dir.empty() || dir.front() != '/') continue;
      const std::filesystem::path candidate = std::filesystem::path(dir) / "bwrap";
      struct stat st {};
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
  }
  return "/usr/bin/bwrap";
}

}  // namespace ptybox::sandbox
