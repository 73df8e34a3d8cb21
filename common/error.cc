#include "common/error.h"

#include <cstring>

namespace ptybox {

std::string_view ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kBusy:
      return "busy";
    case ErrorKind::kModeFenced:
      return "mode_fenced";
    case ErrorKind::kSpawnFailed:
      return "spawn_failed";
    case ErrorKind::kStartupTimeout:
      return "startup_timeout";
    case ErrorKind::kPolicyError:
      return "policy_error";
    case ErrorKind::kPolicyDenied:
      return "policy_denied";
    case ErrorKind::kSandboxUnavailable:
      return "sandbox_unavailable";
    case ErrorKind::kClosed:
      return "closed";
    case ErrorKind::kCleanupFailed:
      return "cleanup_failed";
    case ErrorKind::kCanceled:
      return "canceled";
    case ErrorKind::kNameTaken:
      return "name_taken";
    case ErrorKind::kInvalidParams:
      return "invalid_params";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

Error Error::FromErrno(ErrorKind kind, std::string_view syscall, std::string_view path, int err) {
  std::string message(syscall);
  if (!path.empty()) {
    message += " ";
    message += path;
  }
  message += ": ";
  message += std::strerror(err);
  Error error{kind, std::move(message), std::string(path)};
  error.sys_errno = err;
  return error;
}

std::string Error::Describe() const {
  if (context.empty() || message.find(context) != std::string::npos) return message;
  return message + " (" + context + ")";
}

}  // namespace ptybox
