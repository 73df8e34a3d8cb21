#include "runtime/mcp_connect.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "policy/mode.h"

namespace ptybox::runtime {
namespace {

constexpr size_t kMaxTokenFileBytes = 512;

std::filesystem::path StateDirectory() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::filesystem::path(xdg) / "ptybox";
  }
  const char* home = std::getenv("HOME");
  std::string home_dir = home != nullptr ? home : "";
  if (home_dir.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home_dir = pw->pw_dir;
    }
  }
  return std::filesystem::path(home_dir.empty() ? "/tmp" : home_dir) / ".local/state/ptybox";
}

// FNV-1a, 64 bits: a stable name for a path (not a secret, only a key).
std::string PathKey(const std::string& text) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[hash & 0xf];
    hash >>= 4;
  }
  return out;
}

// The kept token, nullopt when there is none. A file another user could read or write is not
// trusted (and not used).
std::optional<std::string> ReadToken(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    LogWarn("mcp --connect: ignoring " + file.string() +
            ": not a regular file of mode 0600 owned by this user");
    return std::nullopt;
  }
  std::array<char, kMaxTokenFileBytes> buffer{};
  ssize_t n = ::read(fd.Get(), buffer.data(), buffer.size());
  if (n <= 0) return std::nullopt;
  std::string token(buffer.data(), static_cast<size_t>(n));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return std::nullopt;
  return token;
}

// Written whole or not at all: a private temporary file renamed over the old one.
Result<void> WriteToken(const std::filesystem::path& file, const std::string& token) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) {
    return Fail(ErrorKind::kInternal,
                "cannot create " + file.parent_path().string() + ": " + ec.message(),
                file.parent_path().string());
  }
  ::chmod(file.parent_path().c_str(), 0700);
  const std::filesystem::path temporary = file.string() + ".tmp-" + RandomHex(8);
  UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     0600));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "open", temporary.string()));
  ::fchmod(fd.Get(), 0600);
  const std::string text = token + "\n";
  bool written = ::write(fd.Get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.Reset();
  if (!written || ::rename(temporary.c_str(), file.c_str()) != 0) {
    Error error = Error::FromErrno(ErrorKind::kInternal, "write", file.string());
    ::unlink(temporary.c_str());
    return std::unexpected(error);
  }
  return {};
}

// One request and its answer on a blocking socket (the daemon sends nothing unasked).
Result<Json> BlockingCall(int fd, int64_t id, const std::string& method, const Json& params) {
  const std::string line =
      Dump(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}) + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "send"));
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  std::array<char, 4096> chunk{};
  while (answer.find('\n') == std::string::npos) {
    ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Fail(ErrorKind::kInternal,
                  "the ptybox daemon closed the connection while answering " + method);
    }
    answer.append(chunk.data(), static_cast<size_t>(n));
    if (answer.size() > LineConnection::kMaxLineBytes) {
      return Fail(ErrorKind::kInternal, "the daemon's answer to " + method + " is too long");
    }
  }
  Json reply = Json::parse(answer.substr(0, answer.find('\n')), nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    return Fail(ErrorKind::kInternal, "the daemon's answer to " + method + " is not JSON");
  }
  if (reply.contains("error")) return std::unexpected(ErrorFromRpc(reply["error"]));
  if (!reply.contains("result")) {
    return Fail(ErrorKind::kInternal, "the daemon's answer to " + method + " has no result");
  }
  return reply["result"];
}

Result<UniqueFd> ConnectSocket(const std::filesystem::path& socket) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = socket.string();
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return Fail(ErrorKind::kInternal, "--connect: the socket path is empty or too long", path);
  }
  std::memcpy(address.sun_path, path.c_str(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "socket"));
  if (::connect(fd.Get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int err = errno;
    return Fail(ErrorKind::kInternal,
                "cannot connect to the ptybox daemon at " + path + ": " + std::strerror(err) +
                    "; start it with `ptybox serve --socket " + path + "`",
                path);
  }
  return fd;
}

}  // namespace

std::filesystem::path McpTokenFile(const std::filesystem::path& workspace) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(workspace, ec);
  return StateDirectory() / ("mcp-" + PathKey(ec ? workspace.string() : real.string()) + ".token");
}

policy::ResolvedPolicy PolicyFromJson(const Json& p) {
  policy::ResolvedPolicy r;
  auto text = [&](const char* key) {
    return p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : std::string();
  };
  r.mode = policy::ParseMode(text("mode")).value_or(policy::Mode::kReadOnly);
  r.ceiling = policy::ParseMode(text("ceiling")).value_or(r.mode);
  r.workspace_root = text("workspaceRoot");
  r.network_allowed = text("network") == "allow";
  if (r.mode != policy::Mode::kDangerFullAccess && p.contains("writableRoots") &&
      p["writableRoots"].is_array()) {
    for (const Json& root : p["writableRoots"]) {
      if (root.is_string() && root.get<std::string>() != r.workspace_root.string()) {
        r.writable_roots.emplace_back(root.get<std::string>());
      }
    }
  }
  if (p.contains("source") && p["source"].is_object()) {
    const Json& source = p["source"];
    if (source.contains("files") && source["files"].is_array()) {
      for (const Json& file : source["files"]) {
        if (file.is_string()) r.policy_files.emplace_back(file.get<std::string>());
      }
    }
    if (source.contains("values") && source["values"].is_object()) {
      for (const auto& [key, from] : source["values"].items()) {
        if (from.is_string()) r.sources[key] = from.get<std::string>();
      }
    }
  }
  return r;
}

Error ErrorFromRpc(const Json& error) {
  const int code = error.is_object() && error.contains("code") && error["code"].is_number_integer()
                       ? error["code"].get<int>()
                       : 0;
  std::string message = error.is_object() && error.contains("message") &&
                                error["message"].is_string()
                            ? error["message"].get<std::string>()
                            : "the daemon answered an error without a message";
  const Json data = error.is_object() && error.contains("data") && error["data"].is_object()
                        ? error["data"]
                        : Json::object();
  ErrorKind kind = ErrorKind::kInternal;
  if (code == -32602) {
    kind = ErrorKind::kInvalidParams;
  } else if (code == -32000 && data.contains("kind") && data["kind"].is_string()) {
    const std::string name = data["kind"].get<std::string>();
    for (ErrorKind k : {ErrorKind::kNotFound, ErrorKind::kBusy, ErrorKind::kModeFenced,
                        ErrorKind::kSpawnFailed, ErrorKind::kStartupTimeout,
                        ErrorKind::kPolicyError, ErrorKind::kPolicyDenied,
                        ErrorKind::kSandboxUnavailable, ErrorKind::kClosed,
                        ErrorKind::kCleanupFailed, ErrorKind::kCanceled, ErrorKind::kNameTaken}) {
      if (ToString(k) == name) kind = k;
    }
  } else if (code != -32000) {
    message = "the daemon refused the request (" + std::to_string(code) + "): " + message;
  }
  // An invalid-params message already names its parameter.
  std::string context = kind != ErrorKind::kInvalidParams && data.contains("context") &&
                                data["context"].is_string()
                            ? data["context"].get<std::string>()
                            : std::string();
  if (kind == ErrorKind::kCanceled && data.contains("reason") && data["reason"].is_string()) {
    message = data["reason"].get<std::string>();
  }
  Error out{kind, message, context};
  if (data.contains("sessionId") && data["sessionId"].is_string()) {
    out.session_id = data["sessionId"].get<std::string>();
  }
  return out;
}

Result<std::shared_ptr<RemoteDaemon>> RemoteDaemon::Connect(
    asio::io_context& io, const std::filesystem::path& socket,
    const std::filesystem::path& workspace) {
  Result<UniqueFd> fd = ConnectSocket(socket);
  if (!fd) return std::unexpected(fd.error());
  // A hang guard for the start: a daemon that never answers ends this process with a reason.
  timeval guard{60, 0};
  ::setsockopt(fd->Get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  int64_t id = 1;
  const std::filesystem::path file = McpTokenFile(workspace);
  bool attached = false;
  bool keep_file = true;
  if (std::optional<std::string> token = ReadToken(file)) {
    // Just after the previous process died the daemon may not have seen it leave yet (busy):
    // asked again a few times before giving up on that owner.
    for (int attempt = 0; attempt < 20; ++attempt) {
      Result<Json> result = BlockingCall(fd->Get(), id++, "owner_attach", {{"ownerToken", *token}});
      if (result) {
        attached = true;
        LogInfo("mcp --connect: attached to the owner kept for " + workspace.string() + ": " +
                std::to_string((*result)["sessions"].size()) + " terminals, " +
                std::to_string((*result)["operations"].size()) + " operations");
        break;
      }
      if (result.error().kind == ErrorKind::kBusy) {
        if (attempt == 19) {
          // Another ptybox mcp --connect holds that owner: its file stays its own.
          LogWarn("mcp --connect: another process is attached to the owner kept for " +
                  workspace.string() + "; this one starts its own owner and keeps no token");
          keep_file = false;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        continue;
      }
      if (result.error().kind == ErrorKind::kNotFound) {
        LogInfo("mcp --connect: the owner kept for " + workspace.string() +
                " is gone (its grace expired or the daemon restarted); starting afresh");
      } else {
        LogWarn("mcp --connect: attaching failed: " + result.error().Describe() +
                "; starting afresh");
      }
      break;
    }
  }
  if (!attached) {
    Result<Json> info = BlockingCall(fd->Get(), id++, "owner_info", Json::object());
    if (!info) return std::unexpected(info.error());
    const std::string token = info->value("ownerToken", std::string());
    if (info->value("detachGraceMs", 0) <= 0) {
      LogWarn("mcp --connect: the daemon's limits.detachGraceMs is 0: the terminals end when "
              "this process does (set it in the operator policy)");
    }
    if (keep_file && !token.empty()) {
      if (Result<void> kept = WriteToken(file, token); !kept) {
        LogWarn("mcp --connect: cannot keep the owner token: " + kept.error().Describe());
      }
    }
  }
  auto remote = std::shared_ptr<RemoteDaemon>(new RemoteDaemon(io, socket.string()));
  Result<Json> resolved = BlockingCall(fd->Get(), id++, "policy_resolve", Json::object());
  if (resolved) {
    remote->policy_ = PolicyFromJson(*resolved);
  } else {
    remote->policy_ = std::unexpected(resolved.error());
  }
  timeval none{0, 0};
  ::setsockopt(fd->Get(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  const int raw = fd->Release();
  Result<std::shared_ptr<LineConnection>> line = LineConnection::Create(io, raw, raw);
  if (!line) return std::unexpected(line.error());
  remote->connection_ = *line;
  AttachServer(*remote->connection_, remote);
  return remote;
}

void RemoteDaemon::Call(const std::string& method, const Json& params, const std::string& key,
                        std::function<void(Result<Json>)> done) {
  if (gone_) {
    asio::post(io_, [done, where = socket_] {
      done(Fail(ErrorKind::kClosed, "the ptybox daemon at " + where +
                                        " is gone; start it again and restart ptybox mcp"));
    });
    return;
  }
  const int64_t id = next_id_++;
  pending_[id] = Pending{key, std::move(done)};
  if (!key.empty()) by_key_[key] = id;
  connection_->Send(
      Dump(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}));
}

bool RemoteDaemon::Cancel(const std::string& key, const std::string& reason) {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || gone_) return false;
  connection_->Send(Dump(Json{{"jsonrpc", "2.0"},
                              {"method", "$/cancelRequest"},
                              {"params", Json{{"id", it->second}, {"reason", reason}}}}));
  return true;
}

void RemoteDaemon::RefreshPolicy(std::function<void()> done) {
  std::weak_ptr<RemoteDaemon> weak = weak_from_this();
  Call("policy_resolve", Json::object(), "", [weak, done](Result<Json> result) {
    if (auto self = weak.lock()) {
      if (result) {
        self->policy_ = PolicyFromJson(*result);
      } else {
        self->policy_ = std::unexpected(result.error());
      }
    }
    done();
  });
}

void RemoteDaemon::Close() {
  if (connection_) connection_->Close();
}

void RemoteDaemon::HandleLine(const std::string& line) {
  Json reply = Json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("id") ||
      !reply["id"].is_number_integer()) {
    LogWarn("mcp --connect: ignored a line from the daemon that answers no request");
    return;
  }
  auto it = pending_.find(reply["id"].get<int64_t>());
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  if (!pending.key.empty()) by_key_.erase(pending.key);
  if (reply.contains("error")) return pending.done(std::unexpected(ErrorFromRpc(reply["error"])));
  pending.done(reply.contains("result") ? reply["result"] : Json::object());
}

void RemoteDaemon::OnDisconnected() {
  if (gone_) return;
  gone_ = true;
  LogWarn("mcp --connect: the daemon at " + socket_ + " closed the connection");
  std::map<int64_t, Pending> pending;
  pending.swap(pending_);
  by_key_.clear();
  for (auto& [id, call] : pending) {
    call.done(Fail(ErrorKind::kClosed, "the ptybox daemon at " + socket_ +
                                           " closed the connection; restart ptybox mcp"));
  }
}

}  // namespace ptybox::runtime
