// libFuzzer target for the JSON-RPC line reader (runtime/rpc/line_connection.h) and, behind it, the
// request decoder: the input is written into a real socket in chunks whose sizes come from the
// input's first byte (1 to 4096 bytes), read by a LineConnection on an asio loop, and every line it
// hands out must be exactly the line a simple model of the framing expects (split at '\n', one
// trailing '\r' dropped, blank lines skipped, an unterminated tail never delivered), whatever the
// chunking. Each line is answered through the same connection, as a server does, and every answer
// must reach the peer. Each line then goes through the decoder as in rpc_request_fuzzer.
#include <sys/socket.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rpc/line_connection.h"
#include "tests/fuzz/rpc_checks.h"

namespace {

using ptybox::fuzz::Check;

std::vector<std::string> ExpectedLines(std::string_view data) {
  std::vector<std::string> lines;
  for (;;) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) break;
    std::string line(data.substr(0, newline));
    data.remove_prefix(newline + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back(std::move(line));
  }
  return lines;
}

// LineConnection::Create where it exists (it never throws), else the constructor.
template <typename Connection = ptybox::runtime::LineConnection>
std::shared_ptr<Connection> MakeConnection(asio::io_context& io, int fd) {
  if constexpr (requires { Connection::Create(io, fd, fd); }) {
    auto made = Connection::Create(io, fd, fd);
    Check(made.has_value());
    return *made;
  } else {
    return std::make_shared<Connection>(io, fd, fd);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // 1 to 4096 bytes per write: splits inside lines, "\r\n" and UTF-8, and whole lines.
  const size_t chunk = size_t{1} << (data[0] % 13);
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  int fds[2];
  Check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  asio::io_context io;
  std::vector<std::string> lines;
  bool closed = false;
  {
    // Owns fds[0], read and written.
    std::shared_ptr<ptybox::runtime::LineConnection> connection = MakeConnection(io, fds[0]);
    ptybox::runtime::LineConnection::Handlers handlers;
    handlers.on_line = [&](std::string line) {
      lines.push_back(std::move(line));
      connection->Send("ok " + std::to_string(lines.size()));
    };
    handlers.on_oversized_line = [] { Check(false); };  // the input is far below the bound
    handlers.on_closed = [&] { closed = true; };
    connection->Start(std::move(handlers));
    for (size_t off = 0; off < input.size(); off += chunk) {
      std::string_view piece = input.substr(off, chunk);
      Check(::write(fds[1], piece.data(), piece.size()) == static_cast<ssize_t>(piece.size()));
      io.poll();
    }
    ::shutdown(fds[1], SHUT_WR);
    io.run();  // until end of input is seen and every answer written
    Check(closed);
    connection->Close();
  }
  // Every answer arrived, in order ("ok 1\nok 2\n..."); the socket buffer holds them all.
  std::string answers;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::recv(fds[1], buffer, sizeof buffer, MSG_DONTWAIT);
    if (n <= 0) break;
    answers.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[1]);
  std::string expected_answers;
  for (size_t i = 1; i <= lines.size(); ++i) expected_answers += "ok " + std::to_string(i) + "\n";
  Check(answers == expected_answers);

  const std::vector<std::string> expected = ExpectedLines(input);
  Check(lines == expected);
  for (const std::string& line : lines) ptybox::fuzz::CheckLine(line);
  return 0;
}
