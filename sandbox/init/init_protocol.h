// The messages ptybox-init and the daemon exchange over their inherited SOCK_SEQPACKET socket,
// one struct per message with every field named (as bubblewrap's PrivSepOp does): the start
// configuration, the PTY master (SCM_RIGHTS), the program's exit, termination, quiet, failure.
// Both ends are built from this file, so the layout is fixed-size and versionless.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {

// Where a confined shell of a root daemon holds the daemon's execute-only copy of bash (an
// O_PATH descriptor, launcher.h kExecCopyInheritFd): the prompt hook execs it for `exec bash`
// (backend::kExecCopyFd names the same number).
inline constexpr int kShellExecCopyFd = 13;

// daemon -> init, first: the program's environment ("NAME=value" entries; never on a command
// line).
struct StartMessage {
  std::vector<std::string> environment;
};
// init -> daemon: the program runs. Carries the PTY master through SCM_RIGHTS (absent in
// --no-pty mode, where the slave fields are 0).
struct ReadyMessage {
  pid_t program_pid = 0;  // in init's pid namespace
  dev_t slave_dev = 0;    // st_dev of the PTY slave
  dev_t slave_rdev = 0;   // st_rdev of the PTY slave
};
// init -> daemon: the program (the shell, or ptybox run's command) ended.
struct ExitedMessage {
  std::optional<int> exit_code;  // set when it exited
  std::optional<int> signal;     // set when a signal killed it
};
// daemon -> init: end every process of the session; SIGKILL what is left after `grace`.
struct TerminateMessage {
  std::chrono::milliseconds grace{0};
};
// init -> daemon: every process of the session has ended; init exits next.
struct QuietMessage {};
// init -> daemon: setup failed before the program ran.
struct FailedMessage {
  std::string reason;  // a sentence saying what failed
  int exec_errno = 0;  // execve's errno when the program itself could not be started, else 0
};

// init -> daemon, before ready (network by name only): the listening TCP socket init bound on
// the session's own loopback (127.0.0.1:port), attached through SCM_RIGHTS. The daemon accepts
// on it and serves each connection with its proxy (backend/proxy/), outside the sandbox: no
// path, no forwarder process, nothing another session could reach.
struct ProxyListenerMessage {
  uint16_t port = 0;
};
using InitMessage = std::variant<StartMessage, ReadyMessage, ExitedMessage, TerminateMessage,
                                 QuietMessage, FailedMessage, ProxyListenerMessage>;

// Largest payload either side sends (the environment block is bounded by this).
inline constexpr size_t kMaxInitPayload = 128 * 1024;

// One message as the bytes of one SOCK_SEQPACKET record, and back. Decode names what is wrong
// with a malformed record (short, wrong payload size, unknown type, fields out of range).
Result<std::string> EncodeInitMessage(const InitMessage& message);
Result<InitMessage> DecodeInitMessage(std::string_view record);

// The message's name for logs ("ready", "exited", ...).
std::string_view InitMessageName(const InitMessage& message);

// Sends one message, with `fd` attached through SCM_RIGHTS when it is >= 0.
Result<void> SendInitMessage(int socket_fd, const InitMessage& message, int fd = -1);

struct ReceivedInitMessage {
  InitMessage message;
  UniqueFd fd;  // the attached descriptor, if one came
};
// Receives one message; nullopt at end of stream (the peer closed). Does not block if the
// socket is non-blocking and empty: returns an error whose sys_errno is EAGAIN in that case.
Result<std::optional<ReceivedInitMessage>> ReceiveInitMessage(int socket_fd);

// Entries travel joined with NUL, so an entry that is not "NAME=value" with a valid name and no
// NUL would be read back as something else (a NUL in a value would start a smuggled variable):
// the launcher refuses such an entry before anything starts, and the decoder drops one.
// Why `entry` cannot travel, or nullopt when it is a well-formed NAME=value.
std::optional<std::string> EnvironmentEntryProblem(std::string_view entry);

}  // namespace ptybox::sandbox
