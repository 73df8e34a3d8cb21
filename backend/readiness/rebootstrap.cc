#include "backend/readiness/rebootstrap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <vector>

#include "backend/readiness/prompt_protocol.h"
#include "common/unique_fd.h"

namespace ptybox::backend {

std::optional<ExecIdentity> ParseExecAddresses(std::string_view line) {
  // The name (field 2) may hold anything, spaces and ')' included: fields start after the last
  // ')'. Field 3 is the first after it.
  const size_t close = line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(close + 1);
  ExecIdentity id;
  int field = 2;
  while (!rest.empty()) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\n')) rest.remove_prefix(1);
    if (rest.empty()) break;
    size_t end = rest.find_first_of(" \n");
    std::string_view token = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    ++field;
    uint64_t* target = field == 28   ? &id.start_stack
                       : field == 48 ? &id.arg_start
                       : field == 50 ? &id.env_start
                                     : nullptr;
    if (!target) continue;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *target);
    if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
  }
  if (field < 50 || id.start_stack == 0 || id.arg_start == 0 || id.env_start == 0) {
    return std::nullopt;  // an old kernel, or fields hidden from a reader without ptrace access
  }
  return id;
}

std::optional<ExecIdentity> ReadExecIdentity(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  UniqueFd fd(::open((dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[2048];
  ssize_t n = ::read(fd.Get(), buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  std::optional<ExecIdentity> id =
      ParseExecAddresses(std::string_view(buf, static_cast<size_t>(n)));
  if (!id) return std::nullopt;
  struct stat st {};
  if (::stat((dir + "/exe").c_str(), &st) != 0) return std::nullopt;
  id->exe_dev = st.st_dev;
  id->exe_ino = st.st_ino;
  return id;
}

std::optional<FileIdentity> FindProgram(std::string_view program, std::string_view path) {
  auto identity = [](const std::string& file) -> std::optional<FileIdentity> {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    return FileIdentity{st.st_dev, st.st_ino};
  };
  if (program.find('/') != std::string_view::npos) return identity(std::string(program));
  while (true) {
    const size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    if (!dir.empty()) {
      if (auto found = identity(std::string(dir) + "/" + std::string(program))) return found;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path.remove_prefix(colon + 1);
  }
}

bool IsExecMachineryCommandLine(std::string_view cmdline) {
  const size_t first = cmdline.find('\0');
  if (first == std::string_view::npos || first == 0) return false;
  const std::string want = "--rcfile" + std::string(1, '\0') + "/proc/self/fd/" +
                           std::to_string(kExecRcFd) + std::string(1, '\0') + "-i" +
                           std::string(1, '\0');
  return cmdline.substr(first + 1) == want;
}

bool RunsAsExecMachinery(pid_t pid) {
  const std::optional<std::string> cmdline = ReadProcessFile(pid, "cmdline");
  return cmdline && IsExecMachineryCommandLine(*cmdline);
}

namespace {

constexpr size_t kPipeCapacity = 64 * 1024;  // a pipe's default (16 pages)
// An image's whole command line or environment, at most (they share the exec's argument space,
// a quarter of the stack limit: 2 MiB with the usual 8 MiB).
constexpr size_t kMaxProcessFile = 4 * 1024 * 1024;

// The shell's main task alone in its group; empty when it is.
std::optional<std::string> ShellAloneInGroup(const ForegroundFacts& facts, pid_t shell) {
  if (shell <= 0 || facts.foreground_pgid != shell)
    return "the shell's group is not in the foreground";
  if (facts.tasks.size() != 1 || facts.tasks[0].pid != shell || facts.tasks[0].tid != shell ||
      facts.tasks[0].outside_group) {
    return "a task other than the shell's main task is in the foreground or reads";
  }
  // No one else at all: a process outside the group with the terminal open (after setsid) could
  // read it without job control stopping it, and a process that opens it later must exist now.
  if (facts.other_processes != size_t{0}) return "other processes live in the session";
  if (facts.unread_input != size_t{0}) return "input is waiting to be read";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> TypeLineRefusal(const ForegroundFacts& facts, pid_t shell) {
  if (facts.waiting_for_input != Finding::kYes)
    return "the shell is not blocked reading the terminal";
  if (std::optional<std::string> refusal = ShellAloneInGroup(facts, shell)) return refusal;
  if (facts.tasks[0].tty_wait == TtyWait::kNone) return "the shell is not reading the terminal";
  // readline reads a line in raw mode; any other read of the shell (a `read -n1` of an rc
  // file, a `read` in canonical mode) is not the line editor's.
  if (facts.canonical != false) return "readline is not reading";
  return std::nullopt;
}

std::optional<std::string> PullRefusal(const ForegroundFacts& facts, pid_t shell) {
  // Every member asleep and none on the terminal (kNo from a complete look; a running task
  // stops the look early and may hide another member).
  if (facts.waiting_for_input != Finding::kNo) return "the shell is not asleep off the terminal";
  if (std::optional<std::string> refusal = ShellAloneInGroup(facts, shell)) return refusal;
  if (facts.tasks[0].running || facts.tasks[0].tty_wait != TtyWait::kNone)
    return "the shell is not in the bootstrap's read";
  return std::nullopt;
}

std::optional<std::string> TaskCountRefusal(const ForegroundFacts& facts,
                                            std::optional<size_t> session_tasks) {
  if (!session_tasks) return "the session has no pids cgroup to count its tasks";
  if (!facts.chain_processes) return "the walk of the session was incomplete";
  if (*session_tasks != *facts.chain_processes) {
    return "the session's cgroup counts " + std::to_string(*session_tasks) + " tasks, the walk " +
           std::to_string(*facts.chain_processes);
  }
  return std::nullopt;
}

namespace {

// Each NUL-ended field of a /proc list (a last one without its NUL included).
std::vector<std::string_view> Fields(std::string_view list) {
  std::vector<std::string_view> fields;
  while (!list.empty()) {
    const size_t end = list.find('\0');
    fields.push_back(list.substr(0, end));
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return fields;
}

}  // namespace

std::optional<std::string> ImageRefusal(std::string_view cmdline, std::string_view environ) {
  const std::vector<std::string_view> argv = Fields(cmdline);
  if (argv.empty()) return "the image has no command line";
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string_view arg = argv[i];
    // A shell option by name (`exec bash -O extglob`): a word of letters and `_` after it.
    if ((arg == "-O" || arg == "+O") && i + 1 < argv.size() && !argv[i + 1].empty() &&
        argv[i + 1].find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string_view::npos) {
      ++i;
      continue;
    }
    if (arg != "-i" && arg != "-l" && arg != "-il" && arg != "-li" && arg != "--login" &&
        arg != "--norc" && arg != "--noprofile") {
      return "the image was started with an argument an interactive shell's start does not have";
    }
  }
  // Variables that run code inside the image, or trace or hook it, before ptybox's bootstrap or
  // around its prompts.
  static constexpr std::string_view kRunsCode[] = {
      "BASH_ENV",
      "ENV",
      "MAIL",
      "MAILPATH",
      "MAILCHECK",
      "SHELLOPTS",
      "BASHOPTS",
      "BASH_XTRACEFD",
      "PS0",
      "PS1",
      "PS2",
      "PS3",
      "PS4",
      "PROMPT_COMMAND",
      "INPUTRC",
      "GCONV_PATH",
      "GLIBC_TUNABLES",
      "LOCPATH",
      "NLSPATH",
  };
  for (std::string_view entry : Fields(environ)) {
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name.starts_with("BASH_FUNC_") || name.starts_with("LD_")) {
      return "the image's environment holds " + std::string(name.substr(0, 64));
    }
    for (std::string_view code : kRunsCode) {
      if (name == code) return "the image's environment sets " + std::string(name);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ReadProcessFile(pid_t pid, const char* name) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd.Get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    // Never judged in part (padding before what is refused): a longer one is unreadable.
    if (text.size() > kMaxProcessFile) return std::nullopt;
  }
}

std::string DescriptorLink(pid_t pid, int fd) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  char buf[256];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return "";
  return std::string(buf, static_cast<size_t>(n));
}

PipeWrite WriteIntoNewPipe(pid_t pid, int fd, std::string_view before, std::string_view bytes) {
  if (bytes.size() >= kPipeCapacity) return PipeWrite::kFailed;
  const std::string link = DescriptorLink(pid, fd);
  // An anonymous pipe reaches only processes that inherited or were passed it; a named FIFO
  // (a path) anyone allowed may open.
  if (!link.starts_with("pipe:[") || link == before) return PipeWrite::kNotYet;
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  // Opening a pipe through /proc opens its other end too (a FIFO open): the shell holds it
  // read-write, so a writer's open succeeds and never blocks.
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!out) return PipeWrite::kFailed;
  struct stat st {};
  if (::fstat(out.Get(), &st) != 0 || !S_ISFIFO(st.st_mode) ||
      link != "pipe:[" + std::to_string(st.st_ino) + "]") {
    return PipeWrite::kFailed;  // replaced between the readlink and the open
  }
  // The only other holder is the shell, which reads: nothing else can interleave. A pipe its
  // user's pipe-buffer limit shrank takes less, and the write stops there (kFailed).
  while (!bytes.empty()) {
    const ssize_t n = ::write(out.Get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return PipeWrite::kFailed;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return PipeWrite::kWritten;
}

}  // namespace ptybox::backend
