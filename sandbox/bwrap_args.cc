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
  std::vector<std::string> Take() { return std::move(argv_); }

 private:
  std::vector<std::string> argv_;
};

}  // namespace

std::vector<std::string> BuildBwrapArgv(const SandboxSpec& spec,
                                        const BwrapInvocation& invocation) {
  const bool writable = spec.mode == policy::Mode::kWorkspaceWrite;
  ArgvBuilder argv;
  argv.Flag(invocation.bwrap.string());

  // Namespaces and process lifetime.
  argv.Flag("--unshare-all");
  if (spec.network_allowed) argv.Flag("--share-net");
  argv.Flag("--unshare-user");  // also when the daemon is root: capabilities stay in the sandbox
  argv.Flag("--die-with-parent");
  argv.Flag("--new-session");

  // Filesystem: the host read-only first, then private /dev, /proc and /tmp on top of it.
  argv.SamePath("--ro-bind", "/");
  argv.Option("--dev", "/dev");
  argv.Option("--proc", "/proc");
  argv.Option("--tmpfs", "/tmp");

  // The workspace and the extra roots after the tmpfs, so they stay visible under /tmp too.
  if (writable) {
    argv.SamePath("--bind", spec.workspace_root);
    for (const auto& root : spec.writable_roots) argv.SamePath("--bind", root);
    // Protected paths go over the writable binds that contain them.
    for (const auto& path : spec.read_only_paths) argv.SamePath("--ro-bind", path);
  } else {
    argv.SamePath("--ro-bind", spec.workspace_root);
    for (const auto& root : spec.writable_roots) argv.SamePath("--ro-bind", root);
  }
  // Last mount: the init binary, read-only even when it lives in /tmp or a writable root.
  argv.SamePath("--ro-bind", invocation.init_binary);

  // Process setup inside the sandbox.
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
  wanted.insert(wanted.end(), candidates.begin(), candidates.end());

  std::vector<std::filesystem::path> result;
  for (const auto& path : wanted) {
    std::error_code ec;
    // canonical() fails for paths that do not exist: those need no protection.
    std::filesystem::path canonical = std::filesystem::canonical(path, ec);
    if (ec) continue;
    if (std::find(result.begin(), result.end(), canonical) == result.end()) {
      result.push_back(std::move(canonical));
    }
  }
  return result;
}

}  // namespace ptybox::sandbox
