#include "sandbox/init/child_exec.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ptybox::sandbox {
namespace {

// The record on the report pipe: one write of a fixed size, atomic on a pipe.
struct Report {
  int32_t stage;
  int32_t err;
};

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Decimal digits of a non-negative value into `out` (async-signal-safe); returns the length.
size_t FormatNumber(int value, char* out) {
  char digits[16];
  size_t n = 0;
  unsigned v = value < 0 ? 0U : static_cast<unsigned>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof(digits));
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

}  // namespace

std::string_view ChildStageName(ChildStage stage) {
  switch (stage) {
    case ChildStage::kFork:
      return "starting a child process";
    case ChildStage::kCgroup:
      return "placing the session in its cgroup";
    case ChildStage::kProcessGroup:
      return "creating a process group";
    case ChildStage::kSession:
      return "creating a session (setsid)";
    case ChildStage::kTerminal:
      return "taking the terminal as the controlling one";
    case ChildStage::kStdio:
      return "setting up standard input and output";
    case ChildStage::kMountStage:
      return "entering the staged mount namespace";
    case ChildStage::kDescriptors:
      return "moving descriptors to their fixed numbers";
    case ChildStage::kCredentials:
      return "dropping to the requested user and group";
    case ChildStage::kDirectory:
      return "changing to the working directory";
    case ChildStage::kExec:
      return "executing the program";
    case ChildStage::kParentDeath:
      return "tying its life to the daemon's";
  }
  return "an unknown step";
}

std::string DescribeChildFailure(const ChildFailure& failure) {
  std::string text(ChildStageName(failure.stage));
  text += " failed";
  if (failure.err != 0) text += std::string(": ") + std::strerror(failure.err);
  return text;
}

void FailChild(ChildFailure failure, int report_fd, int text_fd) {
  const int saved = errno;
  if (report_fd >= 0) {
    const Report report{static_cast<int32_t>(failure.stage), failure.err};
    WriteAll(report_fd, reinterpret_cast<const char*>(&report), sizeof(report));
  }
  if (text_fd >= 0) {
    // Built in a fixed buffer: no allocation between fork and exec.
    char line[160];
    size_t n = 0;
    auto append = [&](std::string_view part) {
      const size_t take = std::min(part.size(), sizeof(line) - n);
      std::memcpy(line + n, part.data(), take);
      n += take;
    };
    append("ptybox: ");
    append(ChildStageName(failure.stage));
    append(" failed");
    if (failure.err != 0) {
      char number[16];
      append(" (errno ");
      append(std::string_view(number, FormatNumber(failure.err, number)));
      append(")");
    }
    append("\n");
    WriteAll(text_fd, line, n);
  }
  errno = saved;
  ::_exit(ChildExitCode(failure.stage));
}

std::optional<ChildFailure> DecodeChildFailure(std::string_view bytes) {
  if (bytes.size() != sizeof(Report)) return std::nullopt;
  Report report{};
  std::memcpy(&report, bytes.data(), sizeof(report));
  for (ChildStage stage : kChildStages) {
    if (static_cast<int32_t>(stage) == report.stage) return ChildFailure{stage, report.err};
  }
  return std::nullopt;
}

std::optional<ChildFailure> AwaitChildExec(int report_fd) {
  char buffer[sizeof(Report)];
  size_t got = 0;
  while (got < sizeof(buffer)) {
    const ssize_t n = ::read(report_fd, buffer + got, sizeof(buffer) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return DecodeChildFailure(std::string_view(buffer, got));
}

void ResetChildSignals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
}

std::string FindProgramOnPath(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) path = entry.substr(5);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string_view dir = std::string_view(path).substr(start, end - start);
    std::string candidate(dir.empty() ? std::string_view(".") : dir);
    candidate.push_back('/');
    candidate.append(name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;
}

bool IsElfFile(int fd) {
  char magic[4] = {};
  return ::pread(fd, magic, sizeof(magic), 0) == static_cast<ssize_t>(sizeof(magic)) &&
         magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

}  // namespace ptybox::sandbox
