// `ptybox ls` and `ptybox attach`: a person's view of the sessions of a running
// `ptybox serve --socket` daemon. `ls` lists the sessions of the owner whose token the person
// holds; `attach` mirrors one session's screen live in the person's terminal (raw mode and the
// alternate screen, restored on every exit path), read-only unless --write: keystrokes are not
// sent, the detach key (Ctrl-]) ends the view and never the session. With --write the person
// takes the session over: their keys go to it, the agent's sends answer busy until they detach.
// Over the terminal_watch extension (docs/protocol.md, "Watching a session").
#pragma once

#include <string>

namespace ptybox::runtime {

struct WatchFlags {
  std::string socket;      // empty: the default socket
  std::string token_file;  // --token-file
  std::string workspace;   // --workspace: the token `ptybox mcp --connect` keeps for it
};

int ListSessions(const WatchFlags& flags, bool json);
// `write`: take the session over (terminal_takeover) and send the person's keys to it; the
// agent's sends answer busy until the person detaches.
int AttachSession(const WatchFlags& flags, const std::string& session_id, bool write);

}  // namespace ptybox::runtime
