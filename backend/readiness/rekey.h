// How a shell that replaced itself (`exec bash`) gets its fresh prompt nonce without it ever
// crossing the terminal: the typed bootstrap line (no secret in it) makes the shell itself open
// a TCP connection to its session's rekey listener (a builtin redirection to
// /dev/tcp/127.0.0.1/PORT: no fork), send kRekeyRequest and read the nonce. Before answering,
// the daemon proves the connection's client end is a socket the shell's own process holds: its
// inode, found by the client's address in the shell's /proc/<pid>/net/tcp (the session's
// network namespace), must be one of the shell's /proc/<pid>/fd. This file holds that proof and
// the parser it needs; backend/rekey_listener.h serves the connection. docs/readiness.md,
// "exec bash".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ptybox::backend {

// The line the shell sends (without its newline).
inline constexpr std::string_view kRekeyRequest = "ptybox-rekey";
// The longest request line read before the connection is refused.
inline constexpr size_t kMaxRekeyRequestBytes = 64;

// An IPv4 TCP endpoint: `address` as it is stored in sockaddr_in.sin_addr.s_addr (network byte
// order; /proc/net/tcp prints that same 32-bit value in hex), `port` in host byte order.
struct TcpEndpoint {
  uint32_t address = 0;
  uint16_t port = 0;
  bool operator==(const TcpEndpoint&) const = default;
};

// The inode of the established socket whose local end is `local` and remote end `remote`, from
// the text of a /proc/<pid>/net/tcp table; nullopt when there is none, or the table is
// malformed where that socket would be.
[[nodiscard]] std::optional<uint64_t> FindEstablishedTcpInode(std::string_view table,
                                                              TcpEndpoint local,
                                                              TcpEndpoint remote);

// Empty when `pid` holds the client end of a connection from `client` to `server` (an
// established socket of its network namespace, open in its descriptor table); otherwise why not.
// Reads /proc/<pid>/net/tcp and /proc/<pid>/fd (the daemon may: root, or owner of the sandbox's
// user namespace).
[[nodiscard]] std::optional<std::string> ClientEndRefusal(pid_t pid, TcpEndpoint client,
                                                          TcpEndpoint server);

// The bootstrap's part that fetches the nonce over the session's rekey listener at `port`: a
// group run by the shell itself with the connection on descriptor 3 (the shell's own fd 3, if
// any, is saved and put back by bash), closed again before anything else runs. Leaves the
// answer in `__ptybox_n` (empty when refused).
[[nodiscard]] std::string RekeyFetchCode(uint16_t port);

}  // namespace ptybox::backend
