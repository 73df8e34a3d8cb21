// Empties every capability set of the calling process with libcap, in the only order that
// works (bounding first, while CAP_SETPCAP may still be effective), sets no_new_privs, and
// verifies the result instead of trusting it.
#include "sandbox/init/capabilities.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <cerrno>
#include <string>

#include "common/propagate.h"

namespace ptybox::sandbox {
namespace {

// Frees a libcap object on every path.
class CapState final {
 public:
  explicit CapState(cap_t caps) : caps_(caps) {}
  CapState(const CapState&) = delete;
  CapState& operator=(const CapState&) = delete;
  ~CapState() {
    if (caps_ != nullptr) cap_free(caps_);
  }
  [[nodiscard]] cap_t Get() const { return caps_; }

 private:
  cap_t caps_;
};

std::string CapName(cap_value_t cap) {
  char* name = cap_to_name(cap);
  if (name == nullptr) return "capability " + std::to_string(cap);
  std::string result(name);
  cap_free(name);
  return result;
}

// The highest capability number the running kernel knows, plus one.
cap_value_t CapCount() { return static_cast<cap_value_t>(cap_max_bits()); }

// The first capability still held in any set, as "<set> <name>", or empty.
Result<std::string> FirstRemainingCapability() {
  CapState caps(cap_get_proc());
  if (caps.Get() == nullptr) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "cap_get_proc"));
  }
  const std::pair<cap_flag_t, const char*> kSets[] = {
      {CAP_EFFECTIVE, "effective"}, {CAP_PERMITTED, "permitted"}, {CAP_INHERITABLE, "inheritable"}};
  for (cap_value_t cap = 0; cap < CapCount(); ++cap) {
    for (const auto& [set, set_name] : kSets) {
      cap_flag_value_t value = CAP_CLEAR;
      if (cap_get_flag(caps.Get(), cap, set, &value) != 0) {
        return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "cap_get_flag"));
      }
      if (value == CAP_SET) return std::string(set_name) + " " + CapName(cap);
    }
    if (cap_get_bound(cap) > 0) return "bounding " + CapName(cap);
    if (CAP_AMBIENT_SUPPORTED() && cap_get_ambient(cap) > 0) return "ambient " + CapName(cap);
  }
  return std::string();
}

bool HasEffective(cap_value_t cap) {
  CapState caps(cap_get_proc());
  if (caps.Get() == nullptr) return false;
  cap_flag_value_t value = CAP_CLEAR;
  return cap_get_flag(caps.Get(), cap, CAP_EFFECTIVE, &value) == 0 && value == CAP_SET;
}

std::unexpected<Error> DropFailed(std::string what, int err = errno) {
  Error error = Error::FromErrno(ErrorKind::kSpawnFailed, what, {}, err);
  error.message = "dropping capabilities failed: " + error.message;
  return std::unexpected(std::move(error));
}

}  // namespace

Result<void> DropAllCapabilities() {
  // Best effort hardening while CAP_SETPCAP is still effective: uid 0 gains nothing from
  // execve and no capability can be raised into the ambient set later.
  if (HasEffective(CAP_SETPCAP)) {
    const unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                          SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (cap_set_secbits(bits) != 0) return DropFailed("cap_set_secbits");
  }

  // Bounding set first: PR_CAPBSET_DROP needs CAP_SETPCAP, which the next step removes.
  for (cap_value_t cap = 0; cap < CapCount(); ++cap) {
    if (cap_get_bound(cap) <= 0) continue;
    if (cap_drop_bound(cap) != 0) {
      const int err = errno;
      return DropFailed(
          "prctl(PR_CAPBSET_DROP, " + CapName(cap) + ")" +
              (err == EPERM ? " (needs CAP_SETPCAP; run inside bwrap --cap-drop ALL)" : ""),
          err);
    }
  }
  if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() != 0) {
    return DropFailed("cap_reset_ambient");
  }
  {
    CapState empty(cap_init());  // every flag clear
    if (empty.Get() == nullptr) return DropFailed("cap_init");
    if (cap_set_proc(empty.Get()) != 0) return DropFailed("cap_set_proc");
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return DropFailed("prctl(PR_SET_NO_NEW_PRIVS)");

  auto remaining = FirstRemainingCapability();
  if (!remaining) return Propagate(remaining);
  if (!remaining->empty()) {
    return Fail(ErrorKind::kSpawnFailed,
                "dropping capabilities failed: " + *remaining + " is still held afterwards");
  }
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
    return Fail(ErrorKind::kSpawnFailed,
                "dropping capabilities failed: no_new_privs is not set afterwards");
  }
  return {};
}

Result<bool> HoldsNoCapabilities() {
  auto remaining = FirstRemainingCapability();
  if (!remaining) return Propagate(remaining);
  if (!remaining->empty()) return false;
  const int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
  if (nnp < 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "prctl(PR_GET_NO_NEW_PRIVS)"));
  }
  return nnp == 1;
}

}  // namespace ptybox::sandbox
