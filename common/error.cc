#include "common/error.h"

#include <array>
#include <cstddef>
#include <cstring>

#include "common/tokens.h"

namespace ptybox {

namespace {

// Each kind with its contract spelling, in the enum's order: the one kind table (ToString, and
// through it the wire's error.data.kind and the tests' EXPECT_ERROR_KIND).
constexpr std::array<NameToken<ErrorKind>, 14> kErrorKindTokens = {{
    {ErrorKind::kNotFound, "not_found"},
    {ErrorKind::kBusy, "busy"},
    {ErrorKind::kModeFenced, "mode_fenced"},
    {ErrorKind::kSpawnFailed, "spawn_failed"},
    {ErrorKind::kStartupTimeout, "startup_timeout"},
    {ErrorKind::kPolicyError, "policy_error"},
    {ErrorKind::kPolicyDenied, "policy_denied"},
    {ErrorKind::kSandboxUnavailable, "sandbox_unavailable"},
    {ErrorKind::kClosed, "closed"},
    {ErrorKind::kCleanupFailed, "cleanup_failed"},
    {ErrorKind::kCanceled, "canceled"},
    {ErrorKind::kNameTaken, "name_taken"},
    {ErrorKind::kInvalidParams, "invalid_params"},
    {ErrorKind::kInternal, "internal"},
}};
static_assert(InEnumOrder(kErrorKindTokens), "kErrorKindTokens must list the kinds in order");
static_assert(kErrorKindTokens.back().value == ErrorKind::kInternal, "every kind is listed");

}  // namespace

std::string_view ToString(ErrorKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kErrorKindTokens.size() ? kErrorKindTokens[index].name : "internal";
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
