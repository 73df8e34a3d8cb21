#include "sandbox/init/init_protocol.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/propagate.h"
#include "common/untrusted_text.h"

namespace ptybox::sandbox {
namespace {

// The record: this header, then `payload_size` bytes. What a, b, c and d hold depends on the
// type; only Encode and Decode below know it.
struct WireHeader {
  uint32_t type;
  int32_t a;
  int64_t b;
  uint64_t c;
  uint64_t d;
  uint32_t payload_size;
  uint32_t reserved;
};

enum class WireType : uint32_t {
  kStart = 1,
  kReady = 2,
  kExited = 3,
  kTerminate = 4,
  kQuiet = 5,
  kFailed = 6,
  kProxyListener = 7,
};

std::string EncodeEnvironment(const std::vector<std::string>& entries) {
  std::string block;
  for (const std::string& entry : entries) {
    block += entry;
    block.push_back('\0');
  }
  return block;
}

std::vector<std::string> DecodeEnvironment(std::string_view block) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\0', start);
    if (end == std::string_view::npos) end = block.size();
    // An entry that is not a well-formed NAME=value is dropped (the launcher refuses one before
    // anything starts: EnvironmentEntryProblem).
    std::string_view entry = block.substr(start, end - start);
    if (!EnvironmentEntryProblem(entry)) entries.emplace_back(entry);
    start = end + 1;
  }
  return entries;
}

struct Wire {
  WireHeader header{};
  std::string payload;
};

Wire ToWire(const InitMessage& message) {
  Wire w;
  std::visit(
      [&w](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, StartMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kStart);
          w.payload = EncodeEnvironment(m.environment);
        } else if constexpr (std::is_same_v<T, ReadyMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kReady);
          w.header.a = m.program_pid;
          w.header.c = m.slave_dev;
          w.header.d = m.slave_rdev;
        } else if constexpr (std::is_same_v<T, ExitedMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kExited);
          w.header.a = m.exit_code.value_or(-1);
          w.header.b = m.signal.value_or(0);
        } else if constexpr (std::is_same_v<T, TerminateMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kTerminate);
          w.header.b = m.grace.count();
        } else if constexpr (std::is_same_v<T, QuietMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kQuiet);
        } else if constexpr (std::is_same_v<T, ProxyListenerMessage>) {
          w.header.type = static_cast<uint32_t>(WireType::kProxyListener);
          w.header.a = m.port;
        } else {
          static_assert(std::is_same_v<T, FailedMessage>);
          w.header.type = static_cast<uint32_t>(WireType::kFailed);
          w.header.a = m.exec_errno;
          w.payload = m.reason;
        }
      },
      message);
  w.header.payload_size = static_cast<uint32_t>(w.payload.size());
  return w;
}

}  // namespace

Result<std::string> EncodeInitMessage(const InitMessage& message) {
  Wire w = ToWire(message);
  if (w.payload.size() > kMaxInitPayload) {
    return Fail(ErrorKind::kSpawnFailed,
                "the " + std::string(InitMessageName(message)) +
                    " message is larger than 128 KiB (for a start message: the session "
                    "environment is too large; pass fewer or shorter variables)",
                "env");
  }
  std::string record(sizeof(WireHeader) + w.payload.size(), '\0');
  std::memcpy(record.data(), &w.header, sizeof(WireHeader));
  std::memcpy(record.data() + sizeof(WireHeader), w.payload.data(), w.payload.size());
  return record;
}

Result<InitMessage> DecodeInitMessage(std::string_view record) {
  if (record.size() < sizeof(WireHeader)) {
    return Fail(ErrorKind::kInternal, "malformed message on the ptybox-init control socket (" +
                                          std::to_string(record.size()) + " bytes)");
  }
  WireHeader h;
  std::memcpy(&h, record.data(), sizeof(h));
  std::string_view payload = record.substr(sizeof(WireHeader));
  if (h.payload_size != payload.size()) {
    return Fail(ErrorKind::kInternal, "ptybox-init control message has a wrong payload size");
  }
  auto no_payload = [&](std::string_view name) -> Result<void> {
    if (payload.empty()) return {};
    return Fail(ErrorKind::kInternal,
                "ptybox-init " + std::string(name) + " message carries an unexpected payload");
  };
  switch (static_cast<WireType>(h.type)) {
    case WireType::kStart:
      return StartMessage{DecodeEnvironment(payload)};
    case WireType::kReady: {
      if (Result<void> ok = no_payload("ready"); !ok) return Propagate(ok);
      if (h.a <= 0) return Fail(ErrorKind::kInternal, "ptybox-init ready message has no pid");
      return ReadyMessage{h.a, static_cast<dev_t>(h.c), static_cast<dev_t>(h.d)};
    }
    case WireType::kExited: {
      if (Result<void> ok = no_payload("exited"); !ok) return Propagate(ok);
      ExitedMessage m;
      if (h.a >= 0) m.exit_code = h.a;
      if (h.b > 0 && h.b < 65) m.signal = static_cast<int>(h.b);
      if (h.a > 255 || h.b < 0 || h.b >= 65 || (m.exit_code.has_value() == m.signal.has_value())) {
        return Fail(ErrorKind::kInternal,
                    "ptybox-init exited message needs exactly one of an exit code (0-255) and "
                    "a signal (1-64)");
      }
      return m;
    }
    case WireType::kTerminate: {
      if (Result<void> ok = no_payload("terminate"); !ok) return Propagate(ok);
      if (h.b < 0) return Fail(ErrorKind::kInternal, "terminate message has a negative grace");
      return TerminateMessage{std::chrono::milliseconds(h.b)};
    }
    case WireType::kQuiet: {
      if (Result<void> ok = no_payload("quiet"); !ok) return Propagate(ok);
      return QuietMessage{};
    }
    case WireType::kFailed:
      return FailedMessage{std::string(payload), h.a};
    case WireType::kProxyListener: {
      if (Result<void> ok = no_payload("proxy listener"); !ok) return Propagate(ok);
      if (h.a <= 0 || h.a > 65535) {
        return Fail(ErrorKind::kInternal, "ptybox-init proxy listener message has no port");
      }
      return ProxyListenerMessage{static_cast<uint16_t>(h.a)};
    }
  }
  return Fail(ErrorKind::kInternal, "unknown message type " + std::to_string(h.type) +
                                        " on the ptybox-init control socket");
}

std::string_view InitMessageName(const InitMessage& message) {
  static constexpr std::string_view kNames[] = {"start", "ready",  "exited",        "terminate",
                                                "quiet", "failed", "proxy listener"};
  return kNames[message.index()];
}

Result<void> SendInitMessage(int socket_fd, const InitMessage& message, int fd) {
  Result<std::string> record = EncodeInitMessage(message);
  if (!record) return Propagate(record);
  iovec iov{record->data(), record->size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return {};
    if (errno != EINTR) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "sendmsg"));
  }
}

Result<std::optional<ReceivedInitMessage>> ReceiveInitMessage(int socket_fd) {
  std::string buffer(sizeof(WireHeader) + kMaxInitPayload, '\0');
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "recvmsg"));

  UniqueFd attached;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (!attached) {
        attached.Reset(fd);
      } else {
        ::close(fd);  // only one descriptor is ever expected
      }
    }
  }
  if (n == 0) return std::optional<ReceivedInitMessage>();
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    return Fail(ErrorKind::kInternal, "oversized message on the ptybox-init control socket");
  }
  Result<InitMessage> message =
      DecodeInitMessage(std::string_view(buffer.data(), static_cast<size_t>(n)));
  if (!message) return Propagate(message);
  return std::optional<ReceivedInitMessage>(
      ReceivedInitMessage{std::move(*message), std::move(attached)});
}

std::optional<std::string> EnvironmentEntryProblem(std::string_view entry) {
  const size_t equals = entry.find('=');
  if (equals == std::string_view::npos || !IsValidEnvName(entry.substr(0, equals))) {
    return "environment entry `" + Printable(entry) +
           "` is not NAME=value with a valid variable name";
  }
  if (entry.find('\0') != std::string_view::npos) {
    return "environment variable " + std::string(entry.substr(0, equals)) +
           " has a NUL character in its value, which would end it and start another variable";
  }
  return std::nullopt;
}

}  // namespace ptybox::sandbox
