#include "common/proc_stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <unordered_set>

#include "common/text_scan.h"
#include "common/unique_fd.h"

namespace ptybox::proc {
namespace {

using text::IsSpace;
using text::NextToken;
using text::ParseNumber;

}  // namespace

std::optional<StatFields> ParseStat(std::string_view text) {
  StatFields f;
  size_t open = text.find(" (");
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  if (!ParseNumber(text.substr(0, open), f.pid)) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  // Fields 3.. follow the comm; field 3 is the state letter.
  std::string_view state = NextToken(rest);
  if (state.size() != 1) return std::nullopt;
  f.state = state[0];
  if (!ParseNumber(NextToken(rest), f.ppid) || !ParseNumber(NextToken(rest), f.pgrp) ||
      !ParseNumber(NextToken(rest), f.session) || !ParseNumber(NextToken(rest), f.tty_nr)) {
    return std::nullopt;
  }
  for (int field = 8; field < 20; ++field) {
    if (NextToken(rest).empty()) return std::nullopt;
  }
  if (!ParseNumber(NextToken(rest), f.num_threads)) return std::nullopt;
  for (int field = 21; field < 38; ++field) {
    if (NextToken(rest).empty()) return f;
  }
  int exit_signal = -1;
  if (ParseNumber(NextToken(rest), exit_signal)) f.exit_signal = exit_signal;
  return f;
}

std::optional<StatFields> ReadStat(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  // The line is well under 1 KiB; the comm is at most 64 bytes.
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd.Get(), buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  return ParseStat(std::string_view(buf, static_cast<size_t>(n)));
}

std::vector<StatFields> ReadAllStats() {
  std::vector<StatFields> table;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return table;
  while (dirent* entry = ::readdir(dir)) {
    pid_t pid = 0;
    if (!ParseNumber(std::string_view(entry->d_name), pid) || pid <= 0) continue;
    if (std::optional<StatFields> stat = ReadStat(pid)) table.push_back(*stat);
  }
  ::closedir(dir);
  return table;
}

std::vector<pid_t> Descendants(const std::vector<StatFields>& table, pid_t root) {
  std::vector<pid_t> found = {root};
  // Each pid once: a cycle (pids reused while we read) cannot loop.
  std::unordered_set<pid_t> seen = {root};
  for (size_t i = 0; i < found.size(); ++i) {
    for (const StatFields& f : table) {
      if (f.ppid == found[i] && seen.insert(f.pid).second) found.push_back(f.pid);
    }
  }
  found.erase(found.begin());
  return found;
}

}  // namespace ptybox::proc
