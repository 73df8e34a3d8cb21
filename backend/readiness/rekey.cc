#include "backend/readiness/rekey.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <vector>

#include "common/unique_fd.h"

namespace ptybox::backend {
namespace {

// "0100007F:9C4B": the address as the 32-bit value the kernel printed, then the port.
std::optional<TcpEndpoint> ParseEndpoint(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon != 8 || text.size() != 13) return std::nullopt;
  TcpEndpoint endpoint;
  auto [a, ea] = std::from_chars(text.data(), text.data() + colon, endpoint.address, 16);
  auto [p, ep] =
      std::from_chars(text.data() + colon + 1, text.data() + text.size(), endpoint.port, 16);
  if (ea != std::errc() || a != text.data() + colon || ep != std::errc() ||
      p != text.data() + text.size()) {
    return std::nullopt;
  }
  return endpoint;
}

std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  while (!line.empty()) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    const size_t end = line.find(' ');
    tokens.push_back(line.substr(0, end));
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  }
  return tokens;
}

std::optional<std::string> ReadWhole(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.Get(), buf, sizeof buf);
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::optional<uint64_t> FindEstablishedTcpInode(std::string_view table, TcpEndpoint local,
                                                TcpEndpoint remote) {
  constexpr std::string_view kEstablished = "01";
  bool header = true;
  while (!table.empty()) {
    const size_t end = table.find('\n');
    std::string_view line = table.substr(0, end);
    table.remove_prefix(end == std::string_view::npos ? table.size() : end + 1);
    if (header) {  // "  sl  local_address rem_address   st tx_queue ..."
      header = false;
      continue;
    }
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    const std::vector<std::string_view> t = Tokens(line);
    if (t.size() < 10) continue;
    const std::optional<TcpEndpoint> l = ParseEndpoint(t[1]);
    const std::optional<TcpEndpoint> r = ParseEndpoint(t[2]);
    if (!l || !r || *l != local || *r != remote || t[3] != kEstablished) continue;
    uint64_t inode = 0;
    auto [p, ec] = std::from_chars(t[9].data(), t[9].data() + t[9].size(), inode);
    if (ec != std::errc() || p != t[9].data() + t[9].size() || inode == 0) return std::nullopt;
    return inode;
  }
  return std::nullopt;
}

std::optional<std::string> ClientEndRefusal(pid_t pid, TcpEndpoint client, TcpEndpoint server) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::optional<std::string> table = ReadWhole(dir + "/net/tcp");
  if (!table) return "the shell's /proc/<pid>/net/tcp is unreadable";
  std::optional<uint64_t> inode = FindEstablishedTcpInode(*table, client, server);
  if (!inode) return "the client end is no established socket of the shell's network namespace";
  const std::string wanted = "socket:[" + std::to_string(*inode) + "]";
  UniqueFd fds(::open((dir + "/fd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fds) return "the shell's descriptor table is unreadable";
  DIR* listing = ::fdopendir(fds.Get());
  if (listing == nullptr) return "the shell's descriptor table is unreadable";
  (void)fds.Release();  // owned by `listing` now
  bool held = false;
  char target[64];
  while (dirent* entry = ::readdir(listing)) {
    if (entry->d_name[0] == '.') continue;
    const ssize_t n = ::readlinkat(::dirfd(listing), entry->d_name, target, sizeof target);
    if (n > 0 && std::string_view(target, static_cast<size_t>(n)) == wanted) {
      held = true;
      break;
    }
  }
  ::closedir(listing);
  if (!held) return "the client end is not a descriptor of the shell";
  return std::nullopt;
}

std::string RekeyFetchCode(uint16_t port) {
  // Builtins only, each spelled with a backslash (no alias applies): the redirections are made
  // by the shell itself, so nothing is forked while the connection is open. `read -t`: a
  // listener that never answers cannot hold the shell.
  std::string code = "{ \\printf '";
  code += kRekeyRequest;
  code += "\\n' >&3 && IFS= \\read -r -t 10 __ptybox_n <&3; } 3<>/dev/tcp/127.0.0.1/";
  code += std::to_string(port);
  code += "; ";
  return code;
}

}  // namespace ptybox::backend
