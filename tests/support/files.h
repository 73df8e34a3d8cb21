// Small file and text helpers shared by every test suite (header-only: the sandbox unit tests
// use them without linking the daemon fixture).
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::testing {

// The whole file, or "" when it cannot be read. POSIX reads, never a stream: a /proc or cgroup
// file of a process or cgroup that vanished mid-read (ESRCH, ENODEV) is the text read so far,
// an answer, where an istreambuf_iterator over an ifstream throws from basic_filebuf::underflow.
// Every test reads /proc and cgroup files through this.
inline std::string ReadFile(const std::filesystem::path& path) {
  std::string text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The lines of a file read with ReadFile (no trailing empty line).
inline std::vector<std::string> ReadLines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"), or -1 when there is none (the
// process is gone).
inline long ProcStatusKib(pid_t pid, std::string_view field) {
  for (const std::string& line : ReadLines("/proc/" + std::to_string(pid) + "/status")) {
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return std::atol(line.c_str() + field.size() + 1);
    }
  }
  return -1;
}

// Writes `text` as the whole file (created or truncated).
inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Writes `text` as git writes its files: a new file renamed over `path`, so that a reader sees
// the old or the new whole, never part of either.
inline void WriteFileByRename(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temp = path.string() + ".renamed-in";
  WriteFile(temp, text);
  std::filesystem::rename(temp, path);
}

// How many times `needle` occurs in `text`, overlapping occurrences included.
inline size_t Count(std::string_view text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Whitespace-separated words.
inline std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// `text` on one line: a backslash, newline and tab written as `\\`, `\n` and `\t` (for test
// diagnostics and the probes' tab-separated lines, which must stay one line each).
inline std::string EscapeControls(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// The inverse of EscapeControls.
inline std::string UnescapeControls(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[++i];
    out += next == 'n' ? '\n' : (next == 't' ? '\t' : next);
  }
  return out;
}

}  // namespace ptybox::testing
