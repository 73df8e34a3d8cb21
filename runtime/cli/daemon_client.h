// A person's blocking client of a running `ptybox serve --socket` daemon (`ptybox ls`,
// `ptybox attach`): JSON-RPC lines over the socket, requests answered in order, the daemon's
// notifications kept for whoever reads them. Not on a reactor: a command-line tool waits.
#pragma once

#include <deque>
#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/unique_fd.h"
#include "runtime/params.h"

namespace ptybox::runtime {

class DaemonClient final {
 public:
  // Connects (the daemon must run as this user or root: runtime/mcp_connect.h).
  static Result<DaemonClient> Connect(const std::filesystem::path& socket);

  // One request; waits for its answer. Notifications that come first are kept (TakeMessage).
  Result<Json> Call(const std::string& method, const Json& params);
  // Sends a request without waiting (its answer arrives later as a message).
  Result<void> Send(const std::string& method, const Json& params);
  // Reads what the socket holds now (call when poll says it is readable); false at its end.
  Result<bool> ReadAvailable();
  // The next whole message received, if any.
  std::optional<Json> TakeMessage();
  [[nodiscard]] int fd() const { return fd_.Get(); }

 private:
  explicit DaemonClient(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<void> SendLine(const std::string& line);

  UniqueFd fd_;
  std::string buffer_;
  std::deque<Json> messages_;
  int64_t next_id_ = 1;
};

// The owner token a person presents (`ls`, `attach`): from --token-file, else the file
// `ptybox mcp --connect` keeps for --workspace (or, with neither, for the current directory
// when it has one). nullopt: none was asked for and none is kept here (the caller's own
// connection's sessions are meant).
Result<std::optional<std::string>> ChooseOwnerToken(const std::string& token_file,
                                                    const std::string& workspace);

// The daemon's socket: --socket, else the default `ptybox serve` listens on.
Result<std::filesystem::path> ChooseSocket(const std::string& socket);

}  // namespace ptybox::runtime
