#include "sandbox/init_protocol.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "policy/schema.h"

namespace ptybox::sandbox {
namespace {

struct WireHeader {
  uint32_t type;
  int32_t a;
  int64_t b;
  uint64_t c;
  uint64_t d;
  uint32_t payload_size;
  uint32_t reserved;
};

}  // namespace

Result<void> SendInitMessage(int socket_fd, const InitMessage& message, int fd) {
  if (message.payload.size() > kMaxInitPayload) {
    return Fail(ErrorKind::kInternal, "init message payload is larger than 128 KiB");
  }
  WireHeader header{static_cast<uint32_t>(message.type),
                    message.a,
                    message.b,
                    message.c,
                    message.d,
                    static_cast<uint32_t>(message.payload.size()),
                    0};
  std::string buffer(sizeof(header) + message.payload.size(), '\0');
  std::memcpy(buffer.data(), &header, sizeof(header));
  std::memcpy(buffer.data() + sizeof(header), message.payload.data(), message.payload.size());

  iovec iov{buffer.data(), buffer.size()};
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

  ReceivedInitMessage received;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (!received.fd) {
        received.fd.Reset(fd);
      } else {
        ::close(fd);  // only one descriptor is ever expected
      }
    }
  }
  if (n == 0) return std::optional<ReceivedInitMessage>();
  if (static_cast<size_t>(n) < sizeof(WireHeader) || (msg.msg_flags & MSG_TRUNC) != 0) {
    return Fail(ErrorKind::kInternal, "malformed message on the ptybox-init control socket");
  }
  WireHeader header;
  std::memcpy(&header, buffer.data(), sizeof(header));
  if (header.payload_size != static_cast<size_t>(n) - sizeof(WireHeader)) {
    return Fail(ErrorKind::kInternal, "ptybox-init control message has a wrong payload size");
  }
  received.message.type = static_cast<InitMessageType>(header.type);
  received.message.a = header.a;
  received.message.b = header.b;
  received.message.c = header.c;
  received.message.d = header.d;
  received.message.payload.assign(buffer.data() + sizeof(WireHeader), header.payload_size);
  return std::optional<ReceivedInitMessage>(std::move(received));
}

std::string EncodeEnvironment(const std::vector<std::string>& entries) {
  std::string block;
  for (const std::string& entry : entries) {
    block += entry;
    block.push_back('\0');
  }
  return block;
}

std::vector<std::string> DecodeEnvironment(const std::string& block) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\0', start);
    if (end == std::string::npos) end = block.size();
    std::string entry(block, start, end - start);
    if (!EnvironmentEntryProblem(entry)) entries.push_back(std::move(entry));
    start = end + 1;
  }
  return entries;
}

std::optional<std::string> EnvironmentEntryProblem(std::string_view entry) {
  const size_t equals = entry.find('=');
  if (equals == std::string_view::npos || !policy::IsValidEnvName(entry.substr(0, equals))) {
    return "environment entry `" + policy::Printable(entry) +
           "` is not NAME=value with a valid variable name";
  }
  if (entry.find('\0') != std::string_view::npos) {
    return "environment variable " + std::string(entry.substr(0, equals)) +
           " has a NUL character in its value, which would end it and start another variable";
  }
  return std::nullopt;
}

}  // namespace ptybox::sandbox
