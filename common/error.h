// Error values shared by every component: a kind that maps onto the wire contract's
// error.data.kind, a sentence a person can act on, and optional context (a path, a key).
// Errors are values (Result<T>); exceptions never cross a component boundary.
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace ptybox {

enum class ErrorKind {
  kNotFound,
  kBusy,
  kModeFenced,
  kSpawnFailed,
  kStartupTimeout,
  kPolicyError,
  kPolicyDenied,
  kSandboxUnavailable,
  kClosed,
  kCleanupFailed,
  kCanceled,
  kNameTaken,      // v1.1: the owner already has an open or opening session of that name
  kInvalidParams,  // maps to JSON-RPC -32602, not to an application error
  kInternal,
};

// The contract's spelling of a kind ("not_found", "mode_fenced", ...).
std::string_view ToString(ErrorKind kind);

struct Error {
  Error() = default;
  Error(ErrorKind kind_in, std::string message_in, std::string context_in = {})
      : kind(kind_in), message(std::move(message_in)), context(std::move(context_in)) {}

  ErrorKind kind = ErrorKind::kInternal;
  std::string message;  // what happened and how to fix it
  std::string context;  // where: a path, file:line:column, a key; may be empty
  // A cleanup that failed while handling this error (e.g. closing a canceled spawn): reported
  // alongside the error, never instead of it.
  std::string cleanup_failure;
  // The errno of the failed system call behind this error, 0 when none (as crun's errors
  // carry their status): callers test it instead of the global errno, which later calls reuse.
  int sys_errno = 0;
  // name_taken: the contract's session id (`pty-<hex>`) of the session that holds the name, once
  // published (error.data.sessionId).
  std::string holder_session_id;

  // "<syscall> <path>: <strerror>" for an errno failure.
  static Error FromErrno(ErrorKind kind, std::string_view syscall, std::string_view path = {},
                         int err = errno);
  // The message with the context appended, for logs and one-line CLI output.
  std::string Describe() const;
};

// A value or the Error that kept it from being made. [[nodiscard]] on the type, so every function
// returning one is: an ignored Result is an ignored failure. Propagate an error with
// common/propagate.h; where ignoring one is right, say why beside a `(void)` cast.
template <typename T>
class [[nodiscard]] Result : public std::expected<T, Error> {
 public:
  using Base = std::expected<T, Error>;
  using Base::Base;
  using Base::operator=;
  Result() = default;
  // A std::expected<T, Error> built elsewhere is a Result.
  Result(const Base& other) : Base(other) {}        // NOLINT(google-explicit-constructor)
  Result(Base&& other) : Base(std::move(other)) {}  // NOLINT(google-explicit-constructor)
};

inline std::unexpected<Error> Fail(ErrorKind kind, std::string message, std::string context = {}) {
  return std::unexpected(Error{kind, std::move(message), std::move(context)});
}

}  // namespace ptybox
