// Unit tests of the typed messages between the daemon and ptybox-init: every message survives
// encode/decode with each field, a real SOCK_SEQPACKET pair carries them (and the PTY master),
// and malformed records are refused with a reason.
#include "sandbox/init/init_protocol.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <variant>

namespace ptybox::sandbox {
namespace {

template <typename T>
T RoundTrip(const T& message) {
  Result<std::string> record = EncodeInitMessage(message);
  EXPECT_TRUE(record) << (record ? "" : record.error().message);
  if (!record) return T{};
  Result<InitMessage> decoded = DecodeInitMessage(*record);
  EXPECT_TRUE(decoded) << (decoded ? "" : decoded.error().message);
  if (!decoded) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(*decoded)) << InitMessageName(*decoded);
  return std::holds_alternative<T>(*decoded) ? std::get<T>(*decoded) : T{};
}

TEST(InitProtocolTest, StartCarriesTheEnvironmentEntries) {
  StartMessage start{{"PATH=/usr/bin", "EMPTY=", "LANG=C.UTF-8"}};
  EXPECT_EQ(RoundTrip(start).environment, start.environment);
  EXPECT_TRUE(RoundTrip(StartMessage{}).environment.empty());
}

TEST(InitProtocolTest, ReadyCarriesPidAndSlaveIdentity) {
  ReadyMessage ready{.program_pid = 42, .slave_dev = 0x1234567890, .slave_rdev = 0x8800003};
  ReadyMessage back = RoundTrip(ready);
  EXPECT_EQ(back.program_pid, 42);
  EXPECT_EQ(back.slave_dev, ready.slave_dev);
  EXPECT_EQ(back.slave_rdev, ready.slave_rdev);
}

TEST(InitProtocolTest, ExitedCarriesExactlyOneOfCodeAndSignal) {
  ExitedMessage code = RoundTrip(ExitedMessage{.exit_code = 3, .signal = std::nullopt});
  EXPECT_EQ(code.exit_code, 3);
  EXPECT_FALSE(code.signal);
  ExitedMessage zero = RoundTrip(ExitedMessage{.exit_code = 0, .signal = std::nullopt});
  EXPECT_EQ(zero.exit_code, 0);
  ExitedMessage killed = RoundTrip(ExitedMessage{.exit_code = std::nullopt, .signal = 9});
  EXPECT_FALSE(killed.exit_code);
  EXPECT_EQ(killed.signal, 9);
}

TEST(InitProtocolTest, ProxyListenerCarriesItsPortAndNeedsOne) {
  EXPECT_EQ(RoundTrip(ProxyListenerMessage{3128}).port, 3128);
  Result<std::string> zero = EncodeInitMessage(ProxyListenerMessage{0});
  ASSERT_TRUE(zero);
  Result<InitMessage> decoded = DecodeInitMessage(*zero);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().message, "ptybox-init proxy listener message has no port");
  EXPECT_EQ(InitMessageName(ProxyListenerMessage{1}), "proxy listener");
}

TEST(InitProtocolTest, TerminateCarriesTheGrace) {
  EXPECT_EQ(RoundTrip(TerminateMessage{std::chrono::milliseconds(2500)}).grace.count(), 2500);
}

TEST(InitProtocolTest, FailedCarriesReasonAndExecErrno) {
  FailedMessage failed = RoundTrip(FailedMessage{"starting nope: No such file", ENOENT});
  EXPECT_EQ(failed.reason, "starting nope: No such file");
  EXPECT_EQ(failed.exec_errno, ENOENT);
  (void)RoundTrip(QuietMessage{});  // no fields: it decodes as itself (checked inside)
}

TEST(InitProtocolTest, AnOversizedStartIsRefusedWithAReason) {
  StartMessage huge{{"BIG=" + std::string(kMaxInitPayload, 'x')}};
  Result<std::string> record = EncodeInitMessage(huge);
  ASSERT_FALSE(record);
  EXPECT_NE(record.error().message.find("128 KiB"), std::string::npos) << record.error().message;
}

TEST(InitProtocolTest, MalformedRecordsAreRefused) {
  EXPECT_FALSE(DecodeInitMessage(""));
  EXPECT_FALSE(DecodeInitMessage("short"));
  Result<std::string> exited = EncodeInitMessage(ExitedMessage{.exit_code = 1, .signal = {}});
  ASSERT_TRUE(exited);
  // A payload size that disagrees with the record.
  EXPECT_FALSE(DecodeInitMessage(*exited + "x"));
  // An unknown type.
  std::string unknown = *exited;
  uint32_t type = 99;
  std::memcpy(unknown.data(), &type, sizeof(type));
  Result<InitMessage> decoded = DecodeInitMessage(unknown);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().message.find("unknown message type 99"), std::string::npos);
  // Exited with neither a code nor a signal.
  std::string neither = *exited;
  int32_t minus_one = -1;
  std::memcpy(neither.data() + sizeof(uint32_t), &minus_one, sizeof(minus_one));
  EXPECT_FALSE(DecodeInitMessage(neither));
}

TEST(InitProtocolTest, ASocketPairCarriesMessagesAndADescriptor) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd daemon(pair[0]);
  UniqueFd init(pair[1]);
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(null_fd);
  ASSERT_TRUE(SendInitMessage(init.Get(), ReadyMessage{.program_pid = 7}, null_fd.Get()));
  Result<std::optional<ReceivedInitMessage>> received = ReceiveInitMessage(daemon.Get());
  ASSERT_TRUE(received && *received);
  ASSERT_TRUE(std::holds_alternative<ReadyMessage>((*received)->message));
  EXPECT_EQ(std::get<ReadyMessage>((*received)->message).program_pid, 7);
  ASSERT_TRUE((*received)->fd);
  struct stat got {
  }, want{};
  ASSERT_EQ(::fstat((*received)->fd.Get(), &got), 0);
  ASSERT_EQ(::fstat(null_fd.Get(), &want), 0);
  EXPECT_EQ(got.st_rdev, want.st_rdev);

  // Non-blocking and empty: the error keeps its errno (EAGAIN), the global errno is not needed.
  ::fcntl(daemon.Get(), F_SETFL, O_NONBLOCK);
  Result<std::optional<ReceivedInitMessage>> empty = ReceiveInitMessage(daemon.Get());
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().sys_errno, EAGAIN);

  init.Reset();
  Result<std::optional<ReceivedInitMessage>> closed = ReceiveInitMessage(daemon.Get());
  ASSERT_TRUE(closed);
  EXPECT_FALSE(*closed);
}

}  // namespace
}  // namespace ptybox::sandbox
