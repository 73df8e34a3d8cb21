// The second wall between sessions and daemons (docs/security.md, "No way back to the daemon"):
// a connection on a daemon's socket is refused when its peer is a process of one of this
// daemon's sessions, of any ptybox session of any daemon, or of another user namespace than the
// daemon's, whatever the first wall (sockets hidden inside the sandbox) did.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace ptybox::runtime {

// Why `peer` counts as a process of one of `daemon`'s sessions, or nullopt when it does not.
// The rule: `peer`'s parent chain (/proc/<pid>/stat) reaches `daemon`. Every session process is
// a descendant of the daemon: sessions are its children, and orphans re-parent to a subreaper
// on the way (ptybox-init, the daemon) or to the pid namespace's init (bwrap's child, inside
// the session). When `daemon` is pid 1 of its namespace (a container entrypoint), foreign
// orphans re-parent to it too, so there the chain must pass through a child of the daemon
// named `bwrap` or `ptybox-init` (a session root). A peer the kernel shows as pid 0 lives in
// a pid namespace we cannot see, so it is not ours. A chain that cannot be read (a process
// exited meanwhile) counts as a session process: the check fails closed.
std::optional<std::string> SessionPeerReason(pid_t peer, pid_t daemon);

// Why `peer` runs under a ptybox session of any daemon: a process named `ptybox-init` among its
// ancestors (not `peer` itself). ptybox-init is a subreaper, so a process of a
// danger-full-access session cannot leave its tree by double-forking; and when it kills its
// ptybox-init, its daemon (a subreaper named `ptybox`) adopts it, so an ancestor named `ptybox`
// counts too. nullopt when none is found; an unreadable chain is refused like
// SessionPeerReason's.
std::optional<std::string> AnySessionPeerReason(pid_t peer);

// How `peer`'s user namespace compares with this process's.
struct NamespaceCheck {
  enum class Verdict { kSame, kOther, kUnknown, kUnsupported } verdict = Verdict::kUnknown;
  std::string detail;  // for kOther and kUnknown: what was read and why it failed
};
// Compares /proc/<peer>/ns/user with /proc/self/ns/user (device and inode). Reading another
// user's (or a non-dumpable process's) namespace link needs ptrace access; then the world-
// readable /proc/<peer>/uid_map and gid_map are compared instead: different maps are another
// namespace, identical ones are taken as the same (an unprivileged sandbox's namespace maps one
// id or a subordinate range, never the whole of the daemon's).
NamespaceCheck CompareUserNamespace(pid_t peer);
// The same for a peer known only by its pidfd (one in a pid namespace above the daemon's, shown
// as pid 0): PIDFD_GET_USER_NAMESPACE. kUnsupported on kernels without it (before 6.11).
NamespaceCheck CompareUserNamespaceByPidfd(int pidfd);

// A refusal: the sentence the client gets and the detail the daemon logs.
struct PeerRefusal {
  std::string message;
  std::string detail;
};
// Every rule above for the peer `peer` (and its pidfd, -1 when there is none) of a daemon
// `daemon`, in order. A peer shown as pid 0 (a pid namespace above the daemon's: the daemon is a
// container's entrypoint) is judged by its pidfd's user namespace alone: another one is refused,
// one that cannot be read is refused, the same one (or a kernel that cannot tell) is admitted.
// Otherwise: this daemon's session, another user namespace, any ptybox session.
std::optional<PeerRefusal> CheckPeer(pid_t peer, pid_t daemon, int pidfd = -1);

// For the socket server: reads the peer of the connected socket `fd` (SO_PEERCRED, and
// SO_PEERPIDFD where the kernel has it, else a pidfd opened at once, so a peer that exited and
// whose pid was reused is not mistaken for another process). Returns true to serve the
// connection. On refusal it writes one JSON-RPC error line (code -32000, kind policy_denied)
// to `fd` and logs the reason; the caller closes the socket.
bool AdmitPeer(int fd);

}  // namespace ptybox::runtime
