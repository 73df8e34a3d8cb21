#include "sandbox/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "common/log.h"
#include "common/propagate.h"
#include "common/unique_fd.h"
#include "sandbox/host_walls.h"
#include "sandbox/init/child_exec.h"
#include "sandbox/init/init_protocol.h"
#include "sandbox/mount_stage.h"
#include "sandbox/seccomp_filter.h"
#include "sandbox/session_home.h"
#include "sandbox/user_namespace.h"

namespace ptybox::sandbox {

void ApplyPolicy(const policy::ResolvedPolicy& p, const std::filesystem::path& cwd,
                 LaunchSpec& launch) {
  launch.mode = p.mode;
  launch.cwd = cwd;
  launch.sandbox.mode = p.mode;
  launch.sandbox.workspace_root = p.workspace_root;
  launch.sandbox.writable_roots = p.writable_roots;
  std::vector<std::filesystem::path> writable = p.writable_roots;
  if (p.mode == policy::Mode::kWorkspaceWrite) writable.push_back(p.workspace_root);
  launch.sandbox.read_only_paths = CollectProtectedPaths(writable, p.policy_files);
  launch.sandbox.network_allowed = p.network_allowed;
  launch.proxy_port =
      policy::IsConfined(p.mode) && p.network_names && !p.network_allowed ? kSessionProxyPort : 0;
  launch.sandbox.cwd = cwd;
  launch.session_uids = p.session_uids;
  ApplyHostWalls(p, launch.sandbox);  // run dirs and hidden paths (docs/security.md)
  // A private home for tool state, in both confined modes (sandbox/session_home.h).
  launch.sandbox.session_home.clear();
  if (policy::IsConfined(p.mode) && SessionHomeMountable(launch.sandbox)) {
    launch.sandbox.session_home = kSessionHome;
  }
  const policy::Limits& l = p.limits;
  launch.rlimits.clear();
  auto limit = [&](LimitedResource resource, const std::optional<int64_t>& value) {
    if (value) launch.rlimits.push_back(ResourceLimit{resource, *value});
  };
  limit(LimitedResource::kProcesses, l.max_processes);
  limit(LimitedResource::kOpenFiles, l.max_open_files);
  limit(LimitedResource::kFileSize, l.max_file_bytes);
  limit(LimitedResource::kCpuSeconds, l.max_cpu_seconds);
  // The memory limit is the session's, in its cgroup; RLIMIT_AS only as a fallback (per
  // process, and it counts address space, not memory): backend/init_session.cc.
  launch.limits = cgroups::SessionLimits{.tasks = l.max_tasks,
                                         .memory_bytes = l.max_memory_bytes,
                                         .cpu_millicores = l.max_cpu_millicores};
}

bool ShellRunsNonDumpable(const LaunchSpec& spec) {
  // Not for an ordinary user's daemon: /proc/<pid>/ files of a non-dumpable process belong to
  // uid 0 of its user namespace, which that sandbox does not map, so they are host root's, mode
  // 0400, and the daemon could not open them (docs/readiness-facts.md).
  return policy::IsConfined(spec.mode) && spec.pty && RunsAsHostRoot();
}

std::vector<std::string> BuildInitArgs(const LaunchSpec& spec) {
  std::vector<std::string> args = {"--control-fd", std::to_string(kInitControlFd)};
  if (policy::IsConfined(spec.mode)) args.emplace_back("--confined");
  // A confined shell of a root daemon runs non-dumpable (init_main.cc, UnreadableCopy).
  if (ShellRunsNonDumpable(spec)) {
    args.emplace_back("--unreadable-shell");
    // `exec bash` runs from the daemon's unreadable copy too (SharedExecCopy).
    args.emplace_back("--exec-copy-fd");
    args.push_back(std::to_string(kExecCopyInheritFd));
  }
  if (!spec.pty) args.emplace_back("--no-pty");
  if (spec.proxy_port != 0 && policy::IsConfined(spec.mode)) {
    args.emplace_back("--proxy-port");
    args.push_back(std::to_string(spec.proxy_port));
  }
  if (policy::IsConfined(spec.mode)) {
    // apt's setting for a session that cannot switch users (sandbox/session_home.h).
    const std::filesystem::path apt_config =
        SessionAptConfigPath(spec.environment, spec.sandbox.session_home);
    if (!apt_config.empty()) {
      args.emplace_back("--apt-config");
      args.push_back(apt_config.string());
    }
  }
  if (!spec.pty && policy::IsConfined(spec.mode)) {
    args.emplace_back("--stderr-fd");
    args.push_back(std::to_string(kCallerStderrFd));
  }
  if (!spec.cwd.empty()) {
    args.emplace_back("--cwd");
    args.push_back(spec.cwd.string());
  }
  args.emplace_back("--rows");
  args.push_back(std::to_string(spec.rows));
  args.emplace_back("--cols");
  args.push_back(std::to_string(spec.columns));
  for (const ResourceLimit& limit : spec.rlimits) {
    args.emplace_back("--rlimit");
    args.push_back(std::string(InfoOf(limit.resource).name) + "=" + std::to_string(limit.value));
  }
  args.emplace_back("--");
  args.insert(args.end(), spec.command.begin(), spec.command.end());
  return args;
}

namespace {

// Until it executes (bwrap's --die-with-parent, ptybox-init's own end, take over), the child dies
// with the daemon: a launch composing thousands of mounts never goes on, and starts a shell, for
// a daemon that was killed meanwhile. Set again after every change of credentials, which clears
// it; a daemon already gone (the child re-parented) ends it at once.
void DieWithDaemon(pid_t daemon, int say) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    FailChild({ChildStage::kParentDeath, errno}, -1, say);
  }
  if (::getppid() != daemon) FailChild({ChildStage::kParentDeath, ESRCH}, -1, say);
}

// Runs in the forked child: only async-signal-safe calls until execve. A failed step ends the
// child with that step's exit status (child_exec.h) and a line on the diagnostics pipe.
[[noreturn]] void ExecChild(const LaunchSpec& spec, const std::vector<char*>& argv, int control,
                            int seccomp, int exec_copy, int diagnostics, int devnull,
                            StagePlan* stage, pid_t daemon) {
  const int say = diagnostics >= 0 ? diagnostics : STDERR_FILENO;
  auto fail = [say](ChildStage step, int err) { FailChild({step, err}, -1, say); };
  DieWithDaemon(daemon, say);
  // Into the session's cgroups first, while still the daemon's credentials and namespaces (the
  // descriptors were opened by the daemon): everything after this is the session's (its CPU
  // quota, its memory charge), nothing before it was the daemon's membership.
  for (int fd : spec.cgroup_procs) {
    if (::write(fd, "0", 1) != 1) fail(ChildStage::kCgroup, errno);
  }
  if (spec.new_process_group) ::setpgid(0, 0);
  // The private mount namespace with the checked binds staged (and, for a root daemon, the
  // drop to the session's unprivileged id) comes first, while the clones' descriptors are
  // still where the parent left them. EnterStage says why on `say` itself.
  if (stage != nullptr && !EnterStage(*stage, say)) FailChild({ChildStage::kMountStage, 0}, -1);
  DieWithDaemon(daemon, say);  // a root daemon's child dropped to the session uid
  // Fixed descriptor numbers: dup to high numbers first so no source is overwritten.
  int control_hi = ::fcntl(control, F_DUPFD_CLOEXEC, 100);
  int seccomp_hi = seccomp >= 0 ? ::fcntl(seccomp, F_DUPFD_CLOEXEC, 100) : -1;
  int copy_hi = exec_copy >= 0 ? ::fcntl(exec_copy, F_DUPFD_CLOEXEC, 100) : -1;
  if (control_hi < 0 || (seccomp >= 0 && seccomp_hi < 0) || (exec_copy >= 0 && copy_hi < 0)) {
    fail(ChildStage::kDescriptors, errno);
  }
  if (spec.pty) {
    // The daemon's stdio may be its protocol stream: never let the sandbox touch it.
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(devnull, STDOUT_FILENO);
    if (diagnostics >= 0) ::dup2(diagnostics, STDERR_FILENO);
  }
  if (::dup2(control_hi, kInitControlFd) < 0) fail(ChildStage::kDescriptors, errno);
  if (seccomp_hi >= 0 && ::dup2(seccomp_hi, kSeccompFd) < 0) {
    fail(ChildStage::kDescriptors, errno);
  }
  if (!spec.pty && diagnostics >= 0) {
    // A confined run (BuildInitArgs gave init --stderr-fd): bwrap's own errors go to the pipe,
    // and the caller's stderr waits at kCallerStderrFd (not close-on-exec, so bwrap passes it
    // on) for init to put back on 2.
    const int caller_hi = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 100);
    if (caller_hi < 0 || ::dup2(diagnostics, STDERR_FILENO) < 0 ||
        ::dup2(caller_hi, kCallerStderrFd) < 0) {
      fail(ChildStage::kDescriptors, errno);
    }
    ::close_range(kCallerStderrFd + 1, ~0U, 0);
  } else if (copy_hi >= 0) {
    // Not close-on-exec: bwrap passes it on to ptybox-init (BuildInitArgs, --exec-copy-fd).
    if (::dup2(copy_hi, kExecCopyInheritFd) < 0) fail(ChildStage::kDescriptors, errno);
    ::close_range(kCallerStderrFd, kCallerStderrFd, 0);
    ::close_range(kExecCopyInheritFd + 1, ~0U, 0);
  } else {
    ::close_range(seccomp_hi >= 0 ? kSeccompFd + 1 : kInitControlFd + 1, ~0U, 0);
  }
  ResetChildSignals();
  // What runs next ends its session its own way (bwrap's --die-with-parent; ptybox-init when its
  // control socket closes, killing the session's tree first): a parent-death SIGKILL carried
  // across the exec would kill ptybox-init alone and leave an unconfined session's processes.
  ::prctl(PR_SET_PDEATHSIG, 0);
  char* empty_env[] = {nullptr};
  ::execve(argv[0], argv.data(), empty_env);
  FailChild({ChildStage::kExec, errno}, -1, STDERR_FILENO);
}

}  // namespace

Result<void> CheckSandboxRoots(const SandboxSpec& sandbox) {
  std::vector<std::filesystem::path> roots = sandbox.writable_roots;
  roots.push_back(sandbox.workspace_root);
  for (const std::filesystem::path& root : roots) {
    std::string text = root.lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    // A root that would bind host mounts back over the sandbox's own /dev, /proc or /tmp, or
    // over the launcher's staging directory, undoes the sandbox.
    bool bad = text == "/" || text.empty();
    for (std::string_view system : {"/proc", "/dev", "/sys", "/run", "/var/run"}) {
      if (text == system || text.starts_with(std::string(system) + "/")) bad = true;
    }
    if (bad) {
      return Fail(ErrorKind::kPolicyDenied,
                  "the root " + root.string() +
                      " cannot be sandboxed (it would expose the host's /, /proc, /dev, /sys or "
                      "/run inside the sandbox); use a project directory as the workspace",
                  root.string());
    }
    // Directories every host process shares: binding one writable (or visible, in read-only)
    // hands the session other programs' files and sockets (a tmux server's, an agent's).
    for (std::string_view shared : {"/tmp", "/var/tmp"}) {
      if (text == shared) {
        return Fail(ErrorKind::kPolicyDenied,
                    "the root " + root.string() +
                        " is a directory shared by every process of the host; binding it would "
                        "hand the session other programs' files and sockets. Use a directory of "
                        "its own (e.g. mkdir " +
                        std::string(shared) + "/myproject) as the workspace or writable root",
                    root.string());
      }
    }
  }
  return {};
}

namespace {

// Validate, then act: every input is checked before anything is created. The message that
// starts the program (its environment pointed at the session's home in confined modes).
Result<StartMessage> CheckLaunch(const LaunchSpec& spec, bool confined) {
  if (spec.command.empty()) return Fail(ErrorKind::kSpawnFailed, "no program to start");
  if (::access(spec.init_binary.c_str(), X_OK) != 0) {
    return Fail(ErrorKind::kSpawnFailed,
                "ptybox-init is not executable at " + spec.init_binary.string() +
                    ": install ptybox completely or set PTYBOX_INIT to its path",
                spec.init_binary.string());
  }
  for (const std::string& entry : spec.environment) {
    if (auto problem = EnvironmentEntryProblem(entry)) {
      return Fail(ErrorKind::kSpawnFailed, *problem, "env");
    }
  }
  std::vector<std::string> environment = spec.environment;
  if (confined && !spec.sandbox.session_home.empty()) {
    PointEnvironmentAtHome(environment, spec.sandbox.session_home);
  }
  StartMessage start{environment};
  if (!EncodeInitMessage(start)) {
    return Fail(ErrorKind::kSpawnFailed, "the session environment is larger than 128 KiB", "env");
  }
  return start;
}

// A confined launch's roots checked and its binds staged (mount_stage.h); `sandbox` becomes
// what bwrap is given.
Result<StagePlan> StageConfined(const LaunchSpec& spec, SandboxSpec& sandbox,
                                const LaunchRepositories& repositories) {
  if (Result<void> roots = CheckSandboxRoots(sandbox); !roots) return Propagate(roots);
  if (sandbox.mode == policy::Mode::kWorkspaceWrite) {
    // Fail closed (repository_walk.h): a repository the walk did not reach would be writable.
    if (!repositories.walked) {
      return Fail(ErrorKind::kSpawnFailed,
                  "internal error: a workspace-write launch without the walk of its roots");
    }
    if (repositories.incomplete) {
      return Fail(ErrorKind::kPolicyDenied, *repositories.incomplete,
                  sandbox.workspace_root.string());
    }
  }
  const bool as_root = RunsAsHostRoot();
  Result<StagePlan> plan =
      PrepareStage(sandbox, spec.init_binary, as_root, spec.session_uids, repositories);
  if (!plan) return Propagate(plan);
  if (as_root) DropCoversOutOfReach(sandbox);
  plan->host_sockets.clear();
  for (const std::filesystem::path& socket : sandbox.host_sockets) {
    plan->host_sockets.push_back(socket.string());
  }
  return plan;
}

// What the child executes: bwrap with the sandbox's argv and the seccomp program (confined), or
// ptybox-init itself (danger-full-access). `seccomp` receives the program's memfd.
Result<std::vector<std::string>> ChildArgv(const LaunchSpec& spec, const SandboxSpec& sandbox,
                                           bool confined, UniqueFd& seccomp) {
  std::vector<std::string> args;
  if (!confined) {
    args.push_back(spec.init_binary.string());
    std::vector<std::string> init_args = BuildInitArgs(spec);
    args.insert(args.end(), init_args.begin(), init_args.end());
    return args;
  }
  Result<UniqueFd> program = BuildSeccompProgram({.network_allowed = spec.sandbox.network_allowed});
  if (!program) return Propagate(program);
  seccomp = std::move(*program);
  BwrapInvocation invocation;
  invocation.bwrap = spec.bwrap;
  invocation.seccomp_fd = kSeccompFd;
  invocation.init_binary = spec.init_binary;
  invocation.init_args = BuildInitArgs(spec);
  return BuildBwrapArgv(sandbox, invocation);
}

}  // namespace

Result<int> SharedExecCopy(const std::string& program) {
  // One per program for the daemon's life: sealed, so every session shares the same bytes.
  static std::map<std::string, UniqueFd> copies;
  if (auto it = copies.find(program); it != copies.end()) return it->second.Get();
  UniqueFd source(::open(program.c_str(), O_RDONLY | O_CLOEXEC));
  if (!source)
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open", program));
  struct stat st {};
  if (::fstat(source.Get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Fail(ErrorKind::kSandboxUnavailable, program + " is not a regular file", program);
  }
  if (!IsElfFile(source.Get())) {
    return Fail(ErrorKind::kSandboxUnavailable, program + " is not an ELF binary", program);
  }
  UniqueFd copy(static_cast<int>(::memfd_create("ptybox-bash", MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!copy)
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "memfd_create", program));
  off_t remaining = st.st_size;
  while (remaining > 0) {
    ssize_t n = ::sendfile(copy.Get(), source.Get(), nullptr, static_cast<size_t>(remaining));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "sendfile", program));
    remaining -= n;
  }
  if (::fchmod(copy.Get(), 0111) != 0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "fchmod 0111", "memfd"));
  }
  if (::fcntl(copy.Get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) !=
      0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "fcntl(F_ADD_SEALS)", "memfd"));
  }
  // The sessions get only a path descriptor: it neither reads nor writes.
  const std::string self = "/proc/self/fd/" + std::to_string(copy.Get());
  UniqueFd path(::open(self.c_str(), O_PATH | O_CLOEXEC));
  if (!path)
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open O_PATH", self));
  const int fd = path.Get();
  copies.emplace(program, std::move(path));
  return fd;
}

namespace {}  // namespace

Result<LaunchedInit> LaunchInit(const LaunchSpec& spec, const LaunchRepositories& repositories) {
  const bool confined = policy::IsConfined(spec.mode);
  Result<StartMessage> start = CheckLaunch(spec, confined);
  if (!start) return Propagate(start);
  SandboxSpec sandbox = spec.sandbox;
  std::optional<StagePlan> stage;
  if (confined) {
    Result<StagePlan> plan = StageConfined(spec, sandbox, repositories);
    if (!plan) return Propagate(plan);
    stage.emplace(std::move(*plan));
  }

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "socketpair"));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);

  UniqueFd seccomp;
  Result<std::vector<std::string>> child_argv = ChildArgv(spec, sandbox, confined, seccomp);
  if (!child_argv) return Propagate(child_argv);
  std::vector<std::string>& args = *child_argv;

  UniqueFd diag_read;
  UniqueFd diag_write;
  // A PTY session's stderr is the pipe throughout; a confined run's only until init runs.
  if (spec.pty || confined) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "pipe2"));
    }
    diag_read.Reset(fds[0]);
    diag_write.Reset(fds[1]);
  }
  // The daemon's execute-only copy of the shell for `exec bash` (ShellRunsNonDumpable). Without
  // it the session still starts: `exec bash` then runs the host's bash, which the shell's
  // bootstrap refuses to hand a nonce to (exit codes null after it, never wrong).
  int exec_copy = -1;
  if (ShellRunsNonDumpable(spec) && !spec.command.empty()) {
    Result<int> copy = SharedExecCopy(FindProgramOnPath(spec.command.front(), spec.environment));
    if (copy) {
      exec_copy = *copy;
    } else {
      LogWarn("exec bash keeps null exit codes in this session: " + copy.error().message);
    }
  }
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull)
    return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "open", "/dev/null"));

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t daemon = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "fork"));
  if (pid == 0) {
    ExecChild(spec, argv, theirs.Get(), seccomp.Get(), exec_copy, diag_write.Get(), devnull.Get(),
              stage ? &*stage : nullptr, daemon);
  }
  theirs.Reset();
  diag_write.Reset();

  LaunchedInit launched;
  launched.pid = pid;
  launched.control = std::move(ours);
  launched.diagnostics = std::move(diag_read);
  if (stage) {
    launched.session_uid_lease = std::move(stage->session_uid_lease);
    launched.private_gits = std::move(stage->private_gits);
    launched.gits_left_read_only = stage->gits_left_read_only;
    for (const PrivateGit& git : launched.private_gits) {
      launched.gits_left_read_only += git.snapshot.worktrees_left_read_only;
    }
  }

  // A child that died before reading gives EPIPE here; the caller learns why from the reaper
  // and the diagnostics pipe, so this failure is not final on its own.
  (void)SendInitMessage(launched.control.Get(), *start);
  return launched;
}

}  // namespace ptybox::sandbox
