#include "sandbox/persons_git.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/proc_stat.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {
namespace {

// The most of a git's command line read: git's own options and the subcommand come first.
constexpr size_t kCmdlineMax = 64 * 1024;

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

namespace {

// A command line's arguments, NUL-separated; the program's name first.
std::vector<std::string_view> Arguments(std::string_view cmdline) {
  std::vector<std::string_view> args;
  while (!cmdline.empty()) {
    const size_t end = std::min(cmdline.find('\0'), cmdline.size());
    args.push_back(cmdline.substr(0, end));
    cmdline.remove_prefix(std::min(end + 1, cmdline.size()));
  }
  return args;
}

// The subcommand's index in `args` (args.size() for a dashed program's own name), or nullopt.
std::optional<size_t> SubcommandAt(const std::vector<std::string_view>& args) {
  if (args.empty()) return std::nullopt;
  const std::string_view program = args[0].substr(args[0].rfind('/') + 1);
  if (program.starts_with("git-")) return args.size();
  // git's options that take the next argument as their value.
  constexpr std::string_view kWithValue[] = {
      "-C",          "-c",           "--git-dir",   "--work-tree",
      "--namespace", "--config-env", "--exec-path", "--super-prefix"};
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].starts_with('-')) return i;
    if (std::ranges::find(kWithValue, args[i]) != std::end(kWithValue)) ++i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> GitSubcommand(std::string_view cmdline) {
  const std::vector<std::string_view> args = Arguments(cmdline);
  const std::optional<size_t> at = SubcommandAt(args);
  if (!at) return std::nullopt;
  if (*at == args.size()) return std::string(args[0].substr(args[0].rfind('/') + 1 + 4));
  return std::string(args[*at]);
}

bool GitMayMoveHead(std::string_view cmdline, std::span<const std::string_view> also_ignored) {
  const std::vector<std::string_view> args = Arguments(cmdline);
  const std::optional<size_t> at = SubcommandAt(args);
  const std::optional<std::string> subcommand = GitSubcommand(cmdline);
  if (!at || !subcommand) return false;
  if (std::ranges::find(kGitLeavesHead, *subcommand) != std::end(kGitLeavesHead) ||
      std::ranges::find(also_ignored, *subcommand) != also_ignored.end()) {
    return false;
  }
  // The arguments after the subcommand (all of them, for a dashed program).
  std::vector<std::string_view> rest(
      args.begin() + static_cast<std::ptrdiff_t>(std::min(*at + 1, args.size())), args.end());
  if (*at == args.size()) rest.assign(args.begin() + 1, args.end());
  auto first_word = [&]() -> std::string_view {
    for (std::string_view arg : rest) {
      if (!arg.starts_with('-')) return arg;
    }
    return {};
  };
  if (*subcommand == "stash") return first_word() != "list" && first_word() != "show";
  if (*subcommand == "worktree") return first_word() != "list";
  if (*subcommand == "reflog") return false;  // shows, expires or deletes log lines only
  if (*subcommand == "branch") {
    return std::ranges::any_of(rest, [](std::string_view arg) {
      // -m/-M (alone or bundled, `-fm`) or --move (or an abbreviation of it): a rename, of the
      // branch HEAD names too.
      const bool short_options = arg.size() > 1 && arg[0] == '-' && arg[1] != '-';
      return (short_options && arg.find_first_of("mM") != std::string_view::npos) ||
             (arg.size() > 3 && std::string_view("--move").starts_with(arg));
    });
  }
  return true;
}

bool PersonsGitRunsIn(const std::filesystem::path& top,
                      std::span<const std::string_view> also_ignored) {
  return PersonsGitRunsInAny(std::span<const std::filesystem::path>(&top, 1), also_ignored);
}

bool PersonsGitRunsInAny(std::span<const std::filesystem::path> tops,
                         std::span<const std::string_view> also_ignored) {
  // The person: each worktree's owner. Another user's process (a file of theirs named `git` run
  // there, for a root daemon) holds nothing (outside review 54).
  std::vector<std::pair<const std::filesystem::path*, uid_t>> owned;
  for (const std::filesystem::path& top : tops) {
    struct stat top_st {};
    if (!top.empty() && ::stat(top.c_str(), &top_st) == 0) owned.emplace_back(&top, top_st.st_uid);
  }
  if (owned.empty()) return false;
  auto owns_one = [&](uid_t uid) {
    return std::any_of(owned.begin(), owned.end(), [&](const auto& o) { return o.second == uid; });
  };
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
    struct stat process_st {};
    if (::stat(at.c_str(), &process_st) != 0 || !owns_one(process_st.st_uid)) continue;
    std::error_code exe_error;
    std::string program = std::filesystem::read_symlink(at + "/exe", exe_error).filename().string();
    if (program.ends_with(" (deleted)")) program.resize(program.size() - 10);  // an upgraded git
    if (exe_error || (program != "git" && !program.starts_with("git-"))) continue;
    // A command line longer than is read (`-c` options by the thousand) may have lost its
    // subcommand: counted, as one not known here is.
    const std::string cmdline = ReadProc(at + "/cmdline", kCmdlineMax);
    const bool cut = cmdline.size() == kCmdlineMax && !GitSubcommand(cmdline);
    if (!cut && !GitMayMoveHead(cmdline, also_ignored)) continue;
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
    found = std::any_of(owned.begin(), owned.end(), [&](const auto& o) {
      if (o.second != process_st.st_uid) return false;
      auto [end, rest] = std::mismatch(o.first->begin(), o.first->end(), cwd.begin(), cwd.end());
      return end == o.first->end();
    });
  }
  ::closedir(proc);
  return found;
}

}  // namespace ptybox::sandbox
