// The controlled prompt of the shell backend: the PROMPT_COMMAND that prints a private marker
// (an OSC carrying a per-session nonce, $? and the working directory) before a fixed PS1, and
// the tracker that finds "latest owned marker + printable tail == PS1" in the decoded stream.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "backend/terminal/vt_parser.h"

namespace ptybox::backend {

inline constexpr std::string_view kPromptPs1 = "$ ";
inline constexpr std::string_view kMarkerOscCode = "6973";

// 128 random bits, hex: unguessable by programs that do not read the shell's own memory.
std::string NewPromptNonce();

// The PROMPT_COMMAND element that holds the lasting hook: a high index, so that a user's (or an
// rc file's) `PROMPT_COMMAND=...`, which assigns element 0, keeps it.
inline constexpr int kPromptHookIndex = 4096;

// Bash code for the initial PROMPT_COMMAND (in the shell's environment, so it carries no
// nonce). Its first run reads the nonce line the daemon writes to the terminal before any
// other program runs (NonceLine), keeps it only in a read-only variable, defines
// `__ptybox_prompt` (re-asserts PS1 and PS2 before every prompt), makes PROMPT_COMMAND
// an array holding PromptHookCommand() at kPromptHookIndex, un-exports PS1, turns off history
// expansion (`!` in agent commands) and the history file. Immune to the user's shell options:
// xtrace, verbose, functrace with a DEBUG trap, nounset, errexit neither print the nonce nor
// put anything between the marker and PS1.
std::string BuildPromptCommand();
// The loader the daemon types into a bash that replaced the session's shell around the exec
// machinery (`exec $SHELL`: backend/readiness/rebootstrap.h), one command line ending in a
// newline that holds no nonce and no hook: it takes itself out of the history list, erases what
// is left on the cursor's line, makes a pipe at descriptor kExecPs1Fd, reads from it the payload
// the daemon writes through /proc once it sees the shell alone in the session
// (BuildRebootstrapPayload), and runs its code.
std::string BuildRebootstrapLine();
// What the daemon writes into the loader's pipe: the nonce line, then the bootstrap (which keeps
// the PROMPT_COMMAND the new shell's rc files set, as element 0), ended by a NUL. With
// `reexec_unreadable` (a shell that ran non-dumpable: confined sessions of a root daemon) the
// nonce is kept only if the unreadable copy of bash is there, and the code then execs it through
// the exec machinery, so that no dumpable image keeps the nonce.
std::string BuildRebootstrapPayload(std::string_view nonce, bool reexec_unreadable);
// The rc file (`--rcfile`, read from a pipe) of a bash started through the exec machinery every
// bootstrap defines (`exec bash`, `exec bash -l`, `exec bash --norc`): installs the hook with
// the nonce the shell that ran `exec` handed over through a pipe (never the terminal, the
// environment or a file), closes the pipes, then reads the rc files that bash would have read
// (~/.bashrc, or the login chain). One line; holds no nonce.
std::string BuildExecRc();
// The descriptor at which a confined shell of a root daemon holds the unreadable (0111),
// sealed copy of bash it execs for `exec bash` (an O_PATH descriptor: sandbox/init).
inline constexpr int kExecCopyFd = 13;
// The pipes of the exec machinery (low numbers: valid under the smallest maxOpenFiles, 16): the
// rc file's text, the controlled PS1 (holding the nonce), and the rc text the launcher passes on
// for the new image to keep. Open only from the `exec` to the new image's rc file.
inline constexpr int kExecRcFd = 10;
inline constexpr int kExecPs1Fd = 11;
inline constexpr int kExecRcCopyFd = 12;
// What the hook element of PROMPT_COMMAND holds: calls the function; carries no nonce.
std::string PromptHookCommand();
// The controlled PS1: the marker (nonce, `$?`, `${PWD@Q}`) as invisible prompt text, then
// kPromptPs1. Bash expands it after PROMPT_COMMAND and after its job-status notices.
std::string PromptPs1(std::string_view nonce);
// The controlled PS2: an invisible continuation marker (nonce, "ps2") and nothing visible, so
// the lines of a heredoc or a multi-line command show no `> ` and can be left out of viewports.
std::string PromptPs2(std::string_view nonce);
// True when an OSC payload is the continuation marker of `nonce`.
[[nodiscard]] bool IsContinuationMarker(std::string_view osc_payload, std::string_view nonce);
// What the daemon writes to the terminal once, at the start, for BuildPromptCommand to read.
std::string NonceLine(std::string_view nonce);

struct PromptMarker {
  int exit_code = 0;
  std::string cwd;
  // False when the directory field could not be decoded (cwd is then empty and not reported).
  bool cwd_known = true;
};

// The directory field of a marker: bash's `${PWD@Q}` quoting, or percent-encoding (an absolute
// path or empty); nullopt when it is neither.
std::optional<std::string> DecodePromptDirectory(std::string_view field);

// Whether an unterminated line (trailing blanks removed) has the shape of bash's own prompt
// when ptybox's hook is gone (`exec bash`): Debian's `user@host:dir$` (optionally after a
// `(chroot)` prefix), bash's default `bash-5.2$`, or a bare `$`; each may end in `#` instead. A
// shape, not a proof: used only to keep that prompt out of a viewport, never to settle a send or
// report a status.
[[nodiscard]] bool LooksLikeBashPrompt(std::string_view line);
// Parses an OSC payload; nullopt unless it is a well-formed marker carrying `nonce`.
std::optional<PromptMarker> ParsePromptMarker(std::string_view osc_payload, std::string_view nonce);
// The OSC payload the shell prints (for tests and fakes): "6973;<nonce>;<exit>;<encoded cwd>".
std::string FormatPromptMarker(std::string_view nonce, int exit_code, std::string_view cwd);

class PromptTracker final : public VtHandler {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // An owned marker was decoded (before any of the prompt text that follows it).
    virtual void OnMarker(const PromptMarker& marker) = 0;
    // The printable tail after the latest owned marker now equals PS1.
    virtual void OnCandidate() = 0;
    // Something followed a candidate: it is no longer the end of the output.
    virtual void OnInvalidated() = 0;
    // Bash printed its continuation prompt (PS2): the line it starts holds only what follows.
    virtual void OnContinuation() {}
  };

  PromptTracker(std::string nonce, std::string ps1, Listener& listener);

  [[nodiscard]] bool candidate() const { return state_ == State::kCandidate; }
  // A fresh nonce (the re-exec'd shell's): markers of the old one are just text from now on.
  void SetNonce(std::string nonce) {
    Drop();
    nonce_ = std::move(nonce);
  }
  [[nodiscard]] const std::optional<PromptMarker>& last_marker() const { return marker_; }

  void OnPrint(std::string_view utf8) override;
  void OnControl(char c) override;
  void OnCsi(const CsiSequence& csi) override;
  void OnOsc(std::string_view payload) override;

 private:
  enum class State { kNone, kAfterMarker, kCandidate };
  void Drop();

  std::string nonce_;
  std::string ps1_;
  Listener& listener_;
  State state_ = State::kNone;
  std::string tail_;
  std::optional<PromptMarker> marker_;
};

}  // namespace ptybox::backend
