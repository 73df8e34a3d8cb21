// The messages ptybox-init and the daemon exchange over their inherited SOCK_SEQPACKET socket:
// the start configuration, the PTY master (SCM_RIGHTS), the shell's exit, termination, quiet.
// Both ends are built from this file, so the layout is fixed-size and versionless.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {

enum class InitMessageType : uint32_t {
  kStart = 1,      // daemon -> init: payload = environment, NUL-separated "K=V" entries
  kReady = 2,      // init -> daemon: a = shell pid (init's pid namespace); c/d = slave st_dev/st_rdev;
                   // carries the PTY master fd (absent in --no-pty mode)
  kExited = 3,     // init -> daemon: a = exit code or -1, b = signal or 0
  kTerminate = 4,  // daemon -> init: b = grace in ms before SIGKILL
  kQuiet = 5,      // init -> daemon: every process of the session has ended; init exits next
  kFailed = 6,     // init -> daemon: payload = a sentence saying what failed (setup before exec);
                   // a = execve's errno when the program itself could not be started, else 0
};

struct InitMessage {
  InitMessageType type = InitMessageType::kFailed;
  int32_t a = 0;
  int64_t b = 0;
  uint64_t c = 0;
  uint64_t d = 0;
  std::string payload;
};

// Largest payload either side sends (the environment block is bounded by this).
inline constexpr size_t kMaxInitPayload = 128 * 1024;

// Sends one message, with `fd` attached through SCM_RIGHTS when it is >= 0.
Result<void> SendInitMessage(int socket_fd, const InitMessage& message, int fd = -1);

struct ReceivedInitMessage {
  InitMessage message;
  UniqueFd fd;  // the attached descriptor, if one came
};
// Receives one message; nullopt at end of stream (the peer closed). Does not block if the
// socket is non-blocking and empty: returns an error with errno EAGAIN in that case.
Result<std::optional<ReceivedInitMessage>> ReceiveInitMessage(int socket_fd);

// Environment block helpers for kStart. Entries are joined with NUL, so an entry that is not
// "NAME=value" with a valid name and no NUL would be read back as something else (a NUL in a
// value would start a smuggled variable): the launcher refuses such an entry before anything
// starts (EnvironmentEntryProblem), and the decoder drops any entry that is not well formed.
std::string EncodeEnvironment(const std::vector<std::string>& entries);
std::vector<std::string> DecodeEnvironment(const std::string& block);
// Why `entry` cannot travel in the block, or nullopt when it is a well-formed NAME=value.
std::optional<std::string> EnvironmentEntryProblem(std::string_view entry);

}  // namespace ptybox::sandbox
