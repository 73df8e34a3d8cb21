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
#include "common/propagate.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "policy/mode.h"
#include "policy/network_names.h"

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

// The state directory, opened by descriptor: its parent is resolved as the user configured it
// ($XDG_STATE_HOME, or ~/.local/state, created when missing), the `ptybox` entry itself is
// created 0700 and opened without following a link, and must be a directory of this user. A link
// planted there (or another user's directory) is refused: nothing is created, chmod-ed or written
// through it.
Result<UniqueFd> OpenStateDirectory(const std::filesystem::path& dir) {
  const std::filesystem::path parent = dir.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return Fail(ErrorKind::kInternal, "cannot create " + parent.string() + ": " + ec.message(),
                parent.string());
  }
  UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd)
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "open", parent.string()));
  const std::string name = dir.filename().string();
  if (::mkdirat(parent_fd.Get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "mkdir", dir.string()));
  }
  UniqueFd fd(
      ::openat(parent_fd.Get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return Fail(ErrorKind::kPolicyDenied,
                  dir.string() +
                      " is not a directory (a symbolic link or a file is there): "
                      "ptybox keeps owner tokens only in a directory of its own; "
                      "remove it and start again",
                  dir.string());
    }
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "open", dir.string()));
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "fstat", dir.string()));
  }
  if (st.st_uid != ::geteuid()) {
    return Fail(ErrorKind::kPolicyDenied,
                dir.string() + " belongs to uid " + std::to_string(st.st_uid) +
                    ", not to this user (uid " + std::to_string(::geteuid()) +
                    "): ptybox keeps owner tokens only in a directory of its own; remove it and "
                    "start again",
                dir.string());
  }
  // Ours, reached without a link: tightening it cannot touch anything else.
  if ((st.st_mode & 077) != 0 && ::fchmod(fd.Get(), 0700) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "chmod", dir.string()));
  }
  return fd;
}

// The kept token, nullopt when there is none. A file another user could read or write is not
// trusted (and not used).
std::optional<std::string> ReadToken(int dir, const std::filesystem::path& file) {
  UniqueFd fd(::openat(dir, file.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
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

// Written whole or not at all: a private temporary file renamed over the old one, both inside
// the directory `dir` (OpenStateDirectory).
Result<void> WriteToken(int dir, const std::filesystem::path& file, const std::string& token) {
  const std::string name = file.filename().string();
  const std::string temporary = name + ".tmp-" + RandomHex(8);
  UniqueFd fd(
      ::openat(dir, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kInternal, "open", (file.parent_path() / temporary).string()));
  }
  ::fchmod(fd.Get(), 0600);
  const std::string text = token + "\n";
  bool written = ::write(fd.Get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.Reset();
  if (!written || ::renameat(dir, temporary.c_str(), dir, name.c_str()) != 0) {
    Error error = Error::FromErrno(ErrorKind::kInternal, "write", file.string());
    ::unlinkat(dir, temporary.c_str(), 0);
    return std::unexpected(error);
  }
  return {};
}

// The daemon must run as this user or as root before it hears a token: a socket another user
// planted at the expected path would otherwise receive it.
Result<void> RequireTrustedDaemon(int fd, const std::string& path) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "SO_PEERCRED", path));
  }
  if (cred.uid != ::geteuid() && cred.uid != 0) {
    return Fail(ErrorKind::kPolicyDenied,
                "the process answering at " + path + " (pid " + std::to_string(cred.pid) +
                    ") runs as uid " + std::to_string(cred.uid) + ", neither this user (uid " +
                    std::to_string(::geteuid()) +
                    ") nor root: it is not a ptybox daemon this user started, so no owner token "
                    "is sent to it; remove that socket and start the daemon with `ptybox serve "
                    "--socket " +
                    path + "`",
                path);
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

Result<std::string> ReadOwnerTokenFile(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT) {
      return Fail(ErrorKind::kNotFound,
                  "no owner token file at " + file.string() +
                      " (`ptybox mcp --connect` writes one per workspace once it connected); "
                      "give --token-file FILE or --workspace DIR",
                  file.string());
    }
    return std::unexpected(Error::FromErrno(ErrorKind::kPolicyDenied, "open", file.string(), err));
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "fstat", file.string()));
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return Fail(ErrorKind::kPolicyDenied,
                file.string() +
                    " is not a regular file of this user with mode 0600: an owner token is a "
                    "secret; `chmod 600` it (and own it) before using it",
                file.string());
  }
  std::array<char, kMaxTokenFileBytes> buffer{};
  const ssize_t n = ::read(fd.Get(), buffer.data(), buffer.size());
  std::string token(buffer.data(), n > 0 ? static_cast<size_t>(n) : 0);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty() || token.find_first_of(" \t\n\r") != std::string::npos) {
    return Fail(ErrorKind::kPolicyError,
                file.string() + " holds no owner token (one line, as owner_info returns it)",
                file.string());
  }
  return token;
}

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
  r.network_allowed = text("network") == policy::NetworkName(true);
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
  std::string message =
      error.is_object() && error.contains("message") && error["message"].is_string()
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
    for (ErrorKind k :
         {ErrorKind::kNotFound, ErrorKind::kBusy, ErrorKind::kModeFenced, ErrorKind::kSpawnFailed,
          ErrorKind::kStartupTimeout, ErrorKind::kPolicyError, ErrorKind::kPolicyDenied,
          ErrorKind::kSandboxUnavailable, ErrorKind::kClosed, ErrorKind::kCleanupFailed,
          ErrorKind::kCanceled, ErrorKind::kNameTaken}) {
      if (ToString(k) == name) kind = k;
    }
  } else if (code != -32000) {
    message = "the daemon refused the request (" + std::to_string(code) + "): " + message;
  }
  // An invalid-params message already names its parameter.
  std::string context =
      kind != ErrorKind::kInvalidParams && data.contains("context") && data["context"].is_string()
          ? data["context"].get<std::string>()
          : std::string();
  if (kind == ErrorKind::kCanceled && data.contains("reason") && data["reason"].is_string()) {
    message = data["reason"].get<std::string>();
  }
  Error out{kind, message, context};
  if (data.contains("sessionId") && data["sessionId"].is_string()) {
    out.holder_session_id = data["sessionId"].get<std::string>();
  }
  return out;
}

namespace {

// A connection to the daemon, checked (RequireTrustedDaemon), with a hang guard for the start: a
// daemon that never answers ends this process with a reason.
Result<UniqueFd> ConnectTrusted(const std::filesystem::path& socket) {
  Result<UniqueFd> fd = ConnectSocket(socket);
  if (!fd) return Propagate(fd);
  if (Result<void> trusted = RequireTrustedDaemon(fd->Get(), socket.string()); !trusted) {
    return Propagate(trusted);
  }
  timeval guard{60, 0};
  ::setsockopt(fd->Get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  return fd;
}

// The mode of a policy_resolve answer; nullopt when it names none.
std::optional<policy::Mode> ModeOf(const Result<Json>& resolved) {
  if (!resolved || !resolved->is_object() || !resolved->contains("mode") ||
      !(*resolved)["mode"].is_string()) {
    return std::nullopt;
  }
  return policy::ParseMode((*resolved)["mode"].get<std::string>());
}

// What became of the owner kept for a workspace.
struct KeptOwner {
  bool attached = false;  // this connection is that owner now
  bool keep_file = true;  // false: another process is attached to it, and the file is its own
};

// owner_attach with the token kept for `workspace`. Just after the previous process died the
// daemon may not have seen it leave yet (busy): asked again a few times before giving up on
// that owner.
KeptOwner AttachKeptOwner(int fd, int64_t& id, const std::string& token,
                          const std::filesystem::path& workspace) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    Result<Json> result = BlockingCall(fd, id++, "owner_attach", {{"ownerToken", token}});
    if (result) {
      LogInfo("mcp --connect: attached to the owner kept for " + workspace.string() + ": " +
              std::to_string((*result)["sessions"].size()) + " terminals, " +
              std::to_string((*result)["operations"].size()) + " operations");
      return {.attached = true};
    }
    if (result.error().kind == ErrorKind::kBusy) {
      if (attempt == 19) {
        // Another ptybox mcp --connect holds that owner: its file stays its own.
        LogWarn("mcp --connect: another process is attached to the owner kept for " +
                workspace.string() + "; this one starts its own owner and keeps no token");
        return {.attached = false, .keep_file = false};
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
  return {};
}

// An attached owner wider than this host's start: the user of the host that widened it consented
// for that host's model, not for this one. Narrowed back (true: still attached), or (live wider
// terminals fence the mode) left to its grace on a fresh connection in `fd` (false).
Result<bool> NarrowToStart(UniqueFd& fd, int64_t& id, std::optional<policy::Mode> start,
                           const std::filesystem::path& socket,
                           const std::filesystem::path& workspace) {
  const std::optional<policy::Mode> mode =
      ModeOf(BlockingCall(fd.Get(), id++, "policy_resolve", Json::object()));
  const policy::Mode free = start.value_or(policy::Mode::kReadOnly);
  if (mode && policy::Within(*mode, free)) return true;
  const std::string was =
      mode ? std::string(policy::ToString(*mode)) : std::string("an unknown mode");
  Result<Json> narrowed = BlockingCall(fd.Get(), id++, "policy_set_mode",
                                       {{"mode", std::string(policy::ToString(free))}});
  if (narrowed) {
    LogWarn("mcp --connect: the owner kept for " + workspace.string() + " was in " + was +
            ", wider than this host's start (" + std::string(policy::ToString(free)) +
            "): narrowed back; a wider mode asks this host's user again");
    return true;
  }
  LogWarn("mcp --connect: the owner kept for " + workspace.string() + " runs terminals in " + was +
          ", wider than this host's start (" + std::string(policy::ToString(free)) +
          ") that only its user consented to (" + narrowed.error().Describe() +
          "): not taking it; this process starts its own owner and keeps no token");
  Result<UniqueFd> fresh = ConnectTrusted(socket);
  if (!fresh) return Propagate(fresh);
  fd = std::move(*fresh);
  id = 1;
  return false;
}

}  // namespace

Result<UniqueFd> ConnectToDaemon(const std::filesystem::path& socket) {
  return ConnectTrusted(socket);
}

Result<std::shared_ptr<RemoteDaemon>> RemoteDaemon::Connect(
    asio::io_context& io, const std::filesystem::path& socket,
    const std::filesystem::path& workspace) {
  Result<UniqueFd> fd = ConnectTrusted(socket);
  if (!fd) return Propagate(fd);
  int64_t id = 1;
  const std::filesystem::path file = McpTokenFile(workspace);
  Result<UniqueFd> state = OpenStateDirectory(file.parent_path());
  if (!state) {
    LogWarn("mcp --connect: " + state.error().Describe() +
            "; this process starts its own owner and keeps no token");
  }
  // This host's start: the mode a fresh owner gets (the operator's), asked before attaching.
  // Consent another host's user gave its model stays with that host: an owner it widened
  // beyond this start is narrowed back, or not taken (docs/security.md, "Model consent").
  const std::optional<policy::Mode> start =
      ModeOf(BlockingCall(fd->Get(), id++, "policy_resolve", Json::object()));
  bool attached = false;
  bool keep_file = static_cast<bool>(state);
  if (std::optional<std::string> token =
          state ? ReadToken(state->Get(), file) : std::optional<std::string>()) {
    const KeptOwner kept = AttachKeptOwner(fd->Get(), id, *token, workspace);
    attached = kept.attached;
    keep_file = keep_file && kept.keep_file;
  }
  if (attached) {
    Result<bool> still = NarrowToStart(*fd, id, start, socket, workspace);
    if (!still) return Propagate(still);
    if (!*still) {
      attached = false;
      keep_file = false;
    }
  }
  if (!attached) {
    Result<Json> info = BlockingCall(fd->Get(), id++, "owner_info", Json::object());
    if (!info) return Propagate(info);
    const std::string token = info->value("ownerToken", std::string());
    if (info->value("detachGraceMs", 0) <= 0) {
      LogWarn(
          "mcp --connect: the daemon's limits.detachGraceMs is 0: the terminals end when "
          "this process does (set it in the operator policy)");
    }
    if (keep_file && !token.empty()) {
      if (Result<void> kept = WriteToken(state->Get(), file, token); !kept) {
        LogWarn("mcp --connect: cannot keep the owner token: " + kept.error().Describe());
      }
    }
  }
  auto remote = std::shared_ptr<RemoteDaemon>(new RemoteDaemon(io, socket.string()));
  Result<Json> resolved = BlockingCall(fd->Get(), id++, "policy_resolve", Json::object());
  if (resolved) {
    remote->policy_ = PolicyFromJson(*resolved);
  } else {
    remote->policy_ = Propagate(resolved);
  }
  timeval none{0, 0};
  ::setsockopt(fd->Get(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  const int raw = fd->Release();
  Result<std::shared_ptr<LineConnection>> line = LineConnection::Create(io, raw, raw);
  if (!line) return Propagate(line);
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
        self->policy_ = Propagate(result);
      }
    }
    done();
  });
}

void RemoteDaemon::Close() {
  // The host's requests still in flight are answered now, as plain `ptybox mcp` answers them
  // at the end of input (there by closing the terminals): here the daemon keeps the terminals
  // and their commands for its grace, and terminal_output reads what they printed.
  std::map<int64_t, Pending> pending;
  pending.swap(pending_);
  by_key_.clear();
  gone_ = true;
  for (auto& [id, call] : pending) {
    call.done(Fail(ErrorKind::kClosed,
                   "the MCP host closed its input before this request was answered; the "
                   "daemon at " +
                       socket_ +
                       " keeps the terminal and its command for its limits.detachGraceMs "
                       "(terminal_output reads the output after a restart)"));
  }
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
