// `ptybox mcp --connect SOCKET` (contract v1.1): the MCP server as a client of a running
// `ptybox serve --socket` daemon, so that a restarted MCP host finds the terminals it had. At
// start it attaches with the owner token it kept for this workspace (a 0600 file under
// $XDG_STATE_HOME/ptybox/, else ~/.local/state/ptybox/), or takes a fresh owner and keeps its
// token; from then on every tool call is one JSON-RPC request to the daemon.
#pragma once

#include <asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/policy.h"
#include "runtime/params.h"
#include "runtime/rpc/line_connection.h"

namespace ptybox::runtime {

// Where the owner token of `workspace` is kept: <state dir>/ptybox/mcp-<16 hex digits of a hash
// of the workspace's real path>.token.
std::filesystem::path McpTokenFile(const std::filesystem::path& workspace);

// A connection to the daemon at `socket`, once it proved to run as this user or as root (a
// socket another user planted never hears a token): `ptybox mcp --connect`, `ls`, `attach`.
Result<UniqueFd> ConnectToDaemon(const std::filesystem::path& socket);

// An owner token kept in `file` (McpTokenFile, or a copy a person was given): read only from a
// regular file of this user that nobody else may read or write (mode 0600), never through a
// symbolic link; each refusal says what to change.
Result<std::string> ReadOwnerTokenFile(const std::filesystem::path& file);

// The contract's policy_resolve answer read back (what the MCP policy clause and resource show).
policy::ResolvedPolicy PolicyFromJson(const Json& resolved);

// A JSON-RPC error object of the daemon read back as an Error (kind, message, sessionId).
Error ErrorFromRpc(const Json& error);

class RemoteDaemon final : public std::enable_shared_from_this<RemoteDaemon> {
 public:
  // Connects, attaches (or takes a fresh owner and keeps its token), reads the owner's policy.
  // Blocking: runs before the reactor serves the MCP host.
  static Result<std::shared_ptr<RemoteDaemon>> Connect(asio::io_context& io,
                                                       const std::filesystem::path& socket,
                                                       const std::filesystem::path& workspace);

  // One contract method on the daemon; `key` (the MCP request) is what Cancel names.
  void Call(const std::string& method, const Json& params, const std::string& key,
            std::function<void(Result<Json>)> done);
  // $/cancelRequest for the call made for `key`; false when none is in flight.
  bool Cancel(const std::string& key, const std::string& reason);
  // The owner's policy as last read (at start and after each policy_set_mode).
  [[nodiscard]] const Result<policy::ResolvedPolicy>& policy() const { return policy_; }
  void RefreshPolicy(std::function<void()> done);
  // The MCP host left: the connection ends, the daemon detaches the owner (its grace).
  void Close();

  // Events of the daemon connection (AttachServer).
  void HandleLine(const std::string& line);
  void OnOversizedLine() {}
  void OnDisconnected();

 private:
  struct Pending {
    std::string key;
    std::function<void(Result<Json>)> done;
  };
  RemoteDaemon(asio::io_context& io, std::string socket) : io_(io), socket_(std::move(socket)) {}

  asio::io_context& io_;
  std::string socket_;
  std::shared_ptr<LineConnection> connection_;
  Result<policy::ResolvedPolicy> policy_ = policy::ResolvedPolicy{};
  std::map<int64_t, Pending> pending_;
  std::map<std::string, int64_t> by_key_;
  int64_t next_id_ = 100;
  bool gone_ = false;
};

}  // namespace ptybox::runtime
