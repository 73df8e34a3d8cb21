// The second wall between sessions and the daemon (docs/security.md, "No way back to the
// daemon"): a connection on the daemon's socket whose peer is a process of one of the daemon's
// own sessions is refused, whatever the first wall (the socket hidden inside the sandbox) did.
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

// For the socket server: reads the peer of the connected socket `fd` (SO_PEERCRED, and
// SO_PEERPIDFD where the kernel has it, so a peer that exited and whose pid was reused is not
// mistaken for another process). Returns true to serve the connection. On refusal it writes
// one JSON-RPC error line (code -32000, kind policy_denied) to `fd` and logs the reason; the
// caller closes the socket.
bool AdmitPeer(int fd);

}  // namespace ptybox::runtime
