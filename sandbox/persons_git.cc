#include "sandbox/persons_git.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/proc_stat.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {
namespace {

// Up to `max` bytes of a /proc file; empty when it cannot be read.
std::string ReadProc(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string text(max, '\0');
  size_t got = 0;
  while (got < max) {
    const ssize_t n = ::read(fd.Get(), text.data() + got, max - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

std::optional<std::string> GitSubcommand(std::string_view cmdline) {
  // git's options that take the next argument as their value.
  constexpr std::string_view kWithValue[] = {
      "-C",          "-c",           "--git-dir",   "--work-tree",
      "--namespace", "--config-env", "--exec-path", "--super-prefix"};
  bool first = true;
  bool value_next = false;
  while (!cmdline.empty()) {
    const size_t end = std::min(cmdline.find('\0'), cmdline.size());
    const std::string_view arg = cmdline.substr(0, end);
    cmdline.remove_prefix(std::min(end + 1, cmdline.size()));
    if (first) {  // the program itself
      first = false;
      continue;
    }
    if (value_next) {
      value_next = false;
      continue;
    }
    if (arg.starts_with('-')) {
      value_next = std::ranges::find(kWithValue, arg) != std::end(kWithValue);
      continue;
    }
    return std::string(arg);
  }
  return std::nullopt;
}

bool PersonsGitRunsIn(const std::filesystem::path& top,
                      std::span<const std::string_view> subcommands) {
  if (top.empty()) return false;
  const pid_t self = ::getpid();
  std::error_code ec;
  const std::filesystem::path our_ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (!found) {
    const dirent* entry = ::readdir(proc);
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string_view::npos) continue;
    const std::string at = "/proc/" + std::string(name);
    if (ReadProc(at + "/comm", 16) != "git\n") continue;
    const std::optional<std::string> subcommand = GitSubcommand(ReadProc(at + "/cmdline", 4096));
    if (!subcommand || std::ranges::find(subcommands, *subcommand) == subcommands.end()) continue;
    // This process's own runs: its child (the keeper, with no exit signal) is the parent.
    const std::optional<proc::StatFields> stat = proc::ParseStat(ReadProc(at + "/stat", 1024));
    if (!stat || proc::IsDead(*stat)) continue;
    const std::optional<proc::StatFields> parent =
        proc::ParseStat(ReadProc("/proc/" + std::to_string(stat->ppid) + "/stat", 1024));
    if (parent && parent->ppid == self && parent->exit_signal == 0) continue;
    std::error_code ns_error;
    const std::filesystem::path ns = std::filesystem::read_symlink(at + "/ns/pid", ns_error);
    if (!ns_error && ns != our_ns) continue;
    std::error_code cwd_error;
    const std::filesystem::path cwd = std::filesystem::read_symlink(at + "/cwd", cwd_error);
    if (cwd_error) continue;  // ended meanwhile, or another user's
    auto [end, rest] = std::mismatch(top.begin(), top.end(), cwd.begin(), cwd.end());
    found = end == top.end();
  }
  ::closedir(proc);
  return found;
}

}  // namespace ptybox::sandbox
