// Policy -> bubblewrap argv. BuildBwrapArgv is pure: the order of the mount options is the
// security argument (later mounts land on top of earlier ones), so it is spelled out step by
// step. CollectProtectedPaths is the only part that looks at the filesystem.
#include "sandbox/bwrap_args.h"

#include <algorithm>
#include <system_error>

namespace ptybox::sandbox {
namespace {

class ArgvBuilder final {
 public:
  void Flag(std::string_view flag) { argv_.emplace_back(flag); }
  void Option(std::string_view flag, std::string value) {
    argv_.emplace_back(flag);
    argv_.push_back(std::move(value));
  }
  // `flag` SRC DEST with the same host path on both sides.
  void SamePath(std::string_view flag, const std::filesystem::path& path) {
    argv_.emplace_back(flag);
    argv_.push_back(path.string());
    argv_.push_back(path.string());
  }
  // `flag` SRC DEST where SRC is the staged source of DEST when there is one.
  void Bind(std::string_view flag, const std::filesystem::path& dest,
            const std::map<std::filesystem::path, std::filesystem::path>& sources) {
    auto found = sources.find(dest);
    argv_.emplace_back(flag);
    argv_.push_back(found == sources.end() ? dest.string() : found->second.string());
    argv_.push_back(dest.string());
  }
  std::vector<std::string> Take() { return std::move(argv_); }

 private:
  std::vector<std::string> argv_;
};

bool IsUnderOrEqual(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const std::filesystem::path rel =
      path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

// Every root the session is granted, and the init binary: a hidden directory must not hold one.
std::vector<std::filesystem::path> Granted(const SandboxSpec& spec,
                                           const std::filesystem::path& init_binary) {
  std::vector<std::filesystem::path> granted = spec.writable_roots;
  granted.push_back(spec.workspace_root);
  granted.push_back(spec.cwd);
  if (!init_binary.empty()) granted.push_back(init_binary);
  return granted;
}

bool HoldsAny(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& paths) {
  return std::any_of(paths.begin(), paths.end(), [&](const std::filesystem::path& p) {
    return !p.empty() && IsUnderOrEqual(p, dir);
  });
}

// `path` is, or lies inside, the workspace or a writable root.
bool InsideAnyRoot(const SandboxSpec& spec, const std::filesystem::path& path) {
  if (!spec.workspace_root.empty() && IsUnderOrEqual(path, spec.workspace_root)) return true;
  return std::any_of(spec.writable_roots.begin(), spec.writable_roots.end(),
                     [&](const std::filesystem::path& root) {
                       return !root.empty() && IsUnderOrEqual(path, root);
                     });
}

void AddKernelWalls(ArgvBuilder& argv) {
  // Bound from the host's /proc over the sandbox's: the same kernel objects (sysctls are
  // global or follow the caller's namespace), read-only. -try: a kernel without the entry has
  // nothing to protect.
  for (const auto& path : ReadOnlyProcPaths()) argv.SamePath("--ro-bind-try", path);
  argv.Option("--tmpfs", "/sys");
  for (const auto& path : VisibleSysPaths()) argv.SamePath("--ro-bind-try", path);
  argv.Option("--remount-ro", "/sys");
}

void HideDirectory(ArgvBuilder& argv, const std::filesystem::path& dir) {
  argv.Option("--tmpfs", dir.string());
  argv.Option("--remount-ro", dir.string());
}

void AddHiddenPaths(const SandboxSpec& spec, const std::filesystem::path& init_binary,
                    ArgvBuilder& argv) {
  const std::vector<std::filesystem::path> granted = Granted(spec, init_binary);
  // The directories that become an empty read-only tmpfs here (the socket's directory, hidden
  // directories that hold no granted root): a path inside one is out of reach already and gets
  // no cover of its own, which bwrap could not create in a read-only tmpfs anyway (an audit
  // log in the socket's directory made every spawn fail).
  std::vector<std::filesystem::path> emptied;
  for (const HiddenPath& hidden : spec.hidden) {
    if (hidden.directory && !HoldsAny(hidden.path, granted)) emptied.push_back(hidden.path);
  }
  auto inside_emptied = [&](const std::filesystem::path& path) {
    return std::any_of(emptied.begin(), emptied.end(), [&](const std::filesystem::path& dir) {
      return IsUnderOrEqual(path, dir) &&
             path.lexically_normal().lexically_relative(dir.lexically_normal()) != ".";
    });
  };
  // Inside a veiled home and no granted path: out of sight already (the veil is empty).
  auto veiled = [&](const std::filesystem::path& path) {
    return std::any_of(
               spec.veiled_homes.begin(), spec.veiled_homes.end(),
               [&](const std::filesystem::path& home) { return IsUnderOrEqual(path, home); }) &&
           std::none_of(granted.begin(), granted.end(), [&](const std::filesystem::path& g) {
             return !g.empty() && (IsUnderOrEqual(path, g) || IsUnderOrEqual(g, path));
           });
  };
  if (!spec.daemon_socket.empty() && !inside_emptied(spec.daemon_socket) &&
      !veiled(spec.daemon_socket)) {
    if (SocketDirectoryHideable(spec, init_binary)) {
      HideDirectory(argv, spec.daemon_socket.parent_path());
      emptied.push_back(spec.daemon_socket.parent_path().lexically_normal());
    } else {
      argv.Option("--ro-bind", "/dev/null");
      argv.Flag(spec.daemon_socket.string());
    }
  }
  for (const HiddenPath& hidden : spec.hidden) {
    if (inside_emptied(hidden.path) || veiled(hidden.path)) continue;
    if (hidden.directory) {
      // A directory that holds a granted root stays: the operator granted the root.
      if (HoldsAny(hidden.path, granted)) continue;
      HideDirectory(argv, hidden.path);
    } else {
      argv.Option("--ro-bind", "/dev/null");
      argv.Flag(hidden.path.string());
    }
  }
}

}  // namespace

const std::vector<std::filesystem::path>& ReadOnlyProcPaths() {
  static const std::vector<std::filesystem::path> paths = {"/proc/sys", "/proc/sysrq-trigger",
                                                           "/proc/irq", "/proc/bus", "/proc/fs"};
  return paths;
}

const std::vector<std::filesystem::path>& VisibleSysPaths() {
  static const std::vector<std::filesystem::path> paths = {"/sys/devices/system/cpu",
                                                           "/sys/devices/system/node"};
  return paths;
}

bool SocketDirectoryHideable(const SandboxSpec& spec, const std::filesystem::path& init_binary) {
  const std::filesystem::path dir = spec.daemon_socket.parent_path().lexically_normal();
  // Directories the system (or the sandbox's own mounts) needs: hiding one breaks the shell.
  static const std::vector<std::filesystem::path> kSystem = {
      "/",      "/bin",     "/boot",    "/dev",       "/etc",     "/home",   "/lib",
      "/lib32", "/lib64",   "/libx32",  "/media",     "/mnt",     "/opt",    "/proc",
      "/root",  "/run",     "/sbin",    "/srv",       "/sys",     "/tmp",    "/usr",
      "/var",   "/var/lib", "/var/tmp", "/var/cache", "/var/log", "/var/run"};
  if (dir.empty() || !dir.is_absolute()) return false;
  std::string text = dir.string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  if (std::find(kSystem.begin(), kSystem.end(), std::filesystem::path(text)) != kSystem.end() ||
      text.starts_with("/usr/") || text.starts_with("/proc/") || text.starts_with("/sys/") ||
      text.starts_with("/dev/")) {
    return false;
  }
  const std::vector<std::filesystem::path> granted = Granted(spec, init_binary);
  if (HoldsAny(text, granted)) return false;
  for (const auto& root : granted) {
    if (!root.empty() && IsUnderOrEqual(text, root)) return false;
  }
  return true;
}

std::vector<std::string> BuildBwrapArgv(const SandboxSpec& spec,
                                        const BwrapInvocation& invocation) {
  const bool writable = spec.mode == policy::Mode::kWorkspaceWrite;
  ArgvBuilder argv;
  argv.Flag(invocation.bwrap.string());

  // Namespaces and process lifetime.
  argv.Flag("--unshare-all");
  if (spec.network_allowed) argv.Flag("--share-net");
  argv.Flag("--unshare-user");  // also when the daemon is root: capabilities stay in the sandbox
  if (spec.uid_zero_inside) {
    argv.Option("--uid", "0");
    argv.Option("--gid", "0");
  }
  argv.Flag("--die-with-parent");
  argv.Flag("--new-session");

  // Filesystem: the host read-only first, then private /dev, /proc and /tmp on top of it.
  argv.SamePath("--ro-bind", "/");
  argv.Option("--dev", "/dev");
  argv.Option("--proc", "/proc");
  argv.Option("--tmpfs", "/tmp");

  // Walls 1 and 2 (docs/security.md), before the binds so a root under /run stays visible:
  // the kernel's global knobs read-only, the host's /sys reduced to the CPU and NUMA topology,
  // the host's run-time directories (service sockets) replaced by empty ones.
  AddKernelWalls(argv);
  for (const auto& dir : spec.run_dirs) argv.Option("--tmpfs", dir.string());
  // An ordinary user's home that holds a granted path (docs/security.md, wall 3): an empty
  // tmpfs, before the binds that put the granted paths back into it, so nothing else of the
  // home (nor anything the host creates there later) is in the session. The starting directory
  // is bound back read-only when no root holds it, before the roots, which may lie inside it.
  for (const auto& home : spec.veiled_homes) argv.Option("--tmpfs", home.string());
  if (!spec.veiled_homes.empty() && !spec.cwd.empty() &&
      std::any_of(
          spec.veiled_homes.begin(), spec.veiled_homes.end(),
          [&](const std::filesystem::path& home) { return IsUnderOrEqual(spec.cwd, home); }) &&
      !InsideAnyRoot(spec, spec.cwd)) {
    argv.SamePath("--ro-bind", spec.cwd);
  }

  // The workspace and the extra roots after the tmpfs, so they stay visible under /tmp too.
  // Sources are the staged objects the launcher checked (bind_sources), not the host paths.
  const auto& from = spec.bind_sources;
  if (!spec.bound_roots.empty()) {
    // Staged: the roots no other root holds, each carrying what was composed onto it.
    for (const auto& root : spec.bound_roots)
      argv.Bind(writable ? "--bind" : "--ro-bind", root, from);
    for (const auto& path : spec.read_only_paths) argv.Bind("--ro-bind", path, from);
  } else if (writable) {
    argv.Bind("--bind", spec.workspace_root, from);
    for (const auto& root : spec.writable_roots) argv.Bind("--bind", root, from);
    // Protected paths go over the writable binds that contain them.
    for (const auto& path : spec.read_only_paths) argv.Bind("--ro-bind", path, from);
  } else {
    argv.Bind("--ro-bind", spec.workspace_root, from);
    for (const auto& root : spec.writable_roots) argv.Bind("--ro-bind", root, from);
  }
  // Walls 2 and 3, after the binds so they cover paths inside the roots too: the daemon's
  // socket (its directory, or the file alone) and the hidden paths (secrets).
  AddHiddenPaths(spec, invocation.init_binary, argv);
  // The private home, after the binds and covers so none of them lands on it; its mount point
  // is made in the sandbox's own empty /run (sandbox/session_home.h), never on the host.
  if (!spec.session_home.empty()) {
    argv.Option("--perms", "0700");
    argv.Option("--tmpfs", spec.session_home.string());
  }

  // Last mount: the init binary, read-only even when it lives in /tmp or a writable root.
  if (!spec.init_composed) argv.Bind("--ro-bind", invocation.init_binary, from);
  // Every mount into a veiled home is made: the veil itself becomes read-only.
  for (const auto& home : spec.veiled_homes) argv.Option("--remount-ro", home.string());
  // The staged sources stay out of sight: the sandbox never sees the launcher's staging place.
  // An empty /run (run_dirs) already hides it; otherwise an empty tmpfs covers it.
  const bool stage_hidden =
      std::any_of(spec.run_dirs.begin(), spec.run_dirs.end(), [](const std::filesystem::path& dir) {
        const std::string stage = kStageDir;
        return stage.starts_with(dir.string() + "/");
      });
  if (!from.empty() && !stage_hidden) argv.Option("--tmpfs", kStageDir);

  // Process setup inside the sandbox. ptybox-init is the namespace's pid 1 (non-dumpable), so
  // no process without the seccomp filter (bwrap's own reaper) is left for the session to
  // reach through /proc/1/mem.
  argv.Flag("--as-pid-1");
  argv.Option("--cap-drop", "ALL");
  argv.Flag("--clearenv");
  argv.Option("--seccomp", std::to_string(invocation.seccomp_fd));
  argv.Option("--chdir", spec.cwd.string());

  argv.Flag("--");
  argv.Flag(invocation.init_binary.string());
  std::vector<std::string> result = argv.Take();
  result.insert(result.end(), invocation.init_args.begin(), invocation.init_args.end());
  return result;
}

std::vector<std::filesystem::path> CollectProtectedPaths(
    const std::vector<std::filesystem::path>& writable_roots,
    const std::vector<std::filesystem::path>& candidates) {
  std::vector<std::filesystem::path> wanted;
  wanted.reserve(writable_roots.size() + candidates.size());
  for (const auto& root : writable_roots) wanted.push_back(root / ".git");
  for (const auto& candidate : candidates) {
    // The directory a policy file lies in is the operator's layout: its links are resolved so
    // the file is found inside the root that holds it; the file itself is never followed.
    std::error_code ec;
    const std::filesystem::path parent =
        std::filesystem::canonical(std::filesystem::absolute(candidate, ec).parent_path(), ec);
    wanted.push_back(ec ? candidate : parent / candidate.filename());
  }

  std::vector<std::filesystem::path> result;
  for (const auto& path : wanted) {
    // Never canonical(): a link would name its target, which may be any host path.
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
    if (ec || (status.type() != std::filesystem::file_type::directory &&
               status.type() != std::filesystem::file_type::regular)) {
      continue;
    }
    std::filesystem::path normal = std::filesystem::absolute(path, ec).lexically_normal();
    if (ec) continue;
    if (std::find(result.begin(), result.end(), normal) == result.end()) {
      result.push_back(std::move(normal));
    }
  }
  return result;
}

}  // namespace ptybox::sandbox
