#include "sandbox/cgroup_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "common/unique_fd.h"

namespace ptybox::sandbox::cgroups {

std::string ReadText(const std::filesystem::path& path) {
  std::string text;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.Get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

std::vector<pid_t> ParsePids(std::string_view text) {
  std::vector<pid_t> pids;
  std::istringstream in{std::string(text)};
  for (long pid; in >> pid;) {
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

Result<void> WriteText(const std::filesystem::path& path, std::string_view text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "open", path.string()));
  }
  ssize_t n;
  do {
    n = ::write(fd.Get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "write", path.string()));
  }
  return {};
}

}  // namespace ptybox::sandbox::cgroups
