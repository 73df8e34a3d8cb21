#include "runtime/cli/attach_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>

#include "common/base64.h"
#include "common/untrusted_text.h"
#include "runtime/cli/attach_view.h"
#include "runtime/cli/daemon_client.h"
#include "runtime/cli/session_table.h"

namespace ptybox::runtime {
namespace {

constexpr int kExitUsage = 2;

// The daemon connection with the person's token chosen; prints why not and returns nullopt.
struct Connected {
  DaemonClient client;
  std::optional<std::string> token;
};

std::optional<Connected> ConnectFor(const char* command, const WatchFlags& flags) {
  Result<std::optional<std::string>> token = ChooseOwnerToken(flags.token_file, flags.workspace);
  if (!token) {
    std::cerr << "ptybox " << command << ": " << token.error().Describe() << "\n";
    return std::nullopt;
  }
  Result<std::filesystem::path> socket = ChooseSocket(flags.socket);
  if (!socket) {
    std::cerr << "ptybox " << command << ": " << socket.error().Describe() << "\n";
    return std::nullopt;
  }
  Result<DaemonClient> client = DaemonClient::Connect(*socket);
  if (!client) {
    std::cerr << "ptybox " << command << ": " << client.error().Describe() << "\n";
    return std::nullopt;
  }
  return Connected{std::move(*client), std::move(*token)};
}

// --- The person's terminal: raw mode and the alternate screen, restored on every exit path.

int g_signal_pipe = -1;

void OnSignal(int signal) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal);
  (void)::write(g_signal_pipe, &byte, 1);
  errno = saved;
}

class PersonTerminal final {
 public:
  PersonTerminal() = default;
  PersonTerminal(const PersonTerminal&) = delete;
  PersonTerminal& operator=(const PersonTerminal&) = delete;
  ~PersonTerminal() { Restore(); }

  Result<void> Enter() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) {
      return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "tcgetattr", "stdin"));
    }
    termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) {
      return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "tcsetattr", "stdin"));
    }
    entered_ = true;
    Write("\x1b[?1049h\x1b[H\x1b[2J");
    return {};
  }

  void Restore() {
    if (!entered_) return;
    entered_ = false;
    Write("\x1b[0m\x1b[?1049l");
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }

  static void Write(std::string_view bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(STDOUT_FILENO, bytes.data() + off, bytes.size() - off);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  static std::pair<int, int> Size() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) {
      return {24, 80};
    }
    return {ws.ws_row, ws.ws_col};
  }

 private:
  termios saved_{};
  bool entered_ = false;
};

// The signals that end the view (restoring the terminal) or resize it arrive on a pipe.
class SignalPipe final {
 public:
  Result<void> Install() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
      return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "pipe2"));
    }
    read_ = UniqueFd(fds[0]);
    write_ = UniqueFd(fds[1]);
    g_signal_pipe = write_.Get();
    struct sigaction action {};
    action.sa_handler = OnSignal;
    ::sigemptyset(&action.sa_mask);
    for (int signal : kSignals) ::sigaction(signal, &action, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    return {};
  }
  ~SignalPipe() {
    for (int signal : kSignals) ::signal(signal, SIG_DFL);
    g_signal_pipe = -1;
  }
  [[nodiscard]] int fd() const { return read_.Get(); }

  static constexpr std::array<int, 5> kSignals = {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT};

 private:
  UniqueFd read_;
  UniqueFd write_;
};

std::string BaseStatus(const Json& watch, const AttachView& view, std::pair<int, int> size,
                       bool holding) {
  std::string status =
      " ptybox attach: " + Printable(watch.value("name", std::string())) + " " +
      Printable(watch.value("sessionId", std::string())) + " " +
      std::to_string(view.session_columns()) + "x" + std::to_string(view.session_rows()) +
      (holding ? ", TAKEN OVER: your keys go to the session, the agent waits; " : ", read-only; ") +
      std::string(kDetachKeyName) + " detaches";
  if (!view.fits()) {
    status += " [your terminal (" + std::to_string(size.second) + "x" + std::to_string(size.first) +
              ") is smaller than the session: its top-left part is shown]";
  }
  return status;
}

// One attach's loop state: the watch, the view, the takeover (--write), and why it ended.
struct Attachment {
  Attachment(Connected& connected_in, const Json& watch_in, int64_t watch_id_in, bool write_in,
             std::optional<AttachView>& view_slot_in)
      : connected(connected_in),
        watch(watch_in),
        watch_id(watch_id_in),
        write(write_in),
        view_slot(view_slot_in),
        view(*view_slot_in) {}

  Connected& connected;
  const Json& watch;
  int64_t watch_id = 0;
  bool write = false;
  std::optional<AttachView>& view_slot;  // rebuilt in place when the session is resized
  AttachView& view;
  std::pair<int, int> size{};
  bool holding = false;
  std::string refusal;  // why the takeover was refused, while it is
  std::string ended;    // why the view ended, for the person once the terminal is restored
  int exit_code = 0;
  bool running = true;

  void End(std::string why, int code) {
    ended = std::move(why);
    exit_code = code;
    running = false;
  }

  void TakeOver() {
    Result<Json> held = connected.client.Call("terminal_takeover", Json{{"watchId", watch_id}});
    holding = static_cast<bool>(held);
    refusal = held ? "" : held.error().message;
  }

  // SIGWINCH redraws at the new size; any other signal ends the view.
  void OnSignals(int fd) {
    unsigned char signal = 0;
    while (::read(fd, &signal, 1) == 1) {
      if (signal == SIGWINCH) {
        size = PersonTerminal::Size();
        view.SetTerminalSize(size.first, size.second);
        view.SetStatus(BaseStatus(watch, view, size, holding));
      } else {
        End(std::string("ended by ") + ::strsignal(signal) + "; the session keeps running", 0);
      }
    }
  }

  // The person's keys: the detach key, keys for a taken-over session, or a read-only notice.
  void OnKeys() {
    std::array<char, 4096> keys{};
    const ssize_t n = ::read(STDIN_FILENO, keys.data(), keys.size());
    if (n <= 0) return End("the terminal closed; the session keeps running", 0);
    const std::string_view typed_keys(keys.data(), static_cast<size_t>(n));
    if (FindDetachKey(typed_keys)) return End("detached; the session keeps running", 0);
    if (!write) {
      view.SetStatus(" read-only: keystrokes are not sent to the session; " +
                     std::string(kDetachKeyName) + " detaches");
      return;
    }
    if (!holding) TakeOver();
    if (!holding) {
      view.SetStatus(" keys not sent: " + refusal);
      return;
    }
    Result<Json> typed = connected.client.Call(
        "terminal_type", Json{{"watchId", watch_id}, {"data", Base64Encode(typed_keys)}});
    view.SetStatus(typed ? BaseStatus(watch, view, size, true)
                         : " keys not sent: " + typed.error().message);
  }

  // What the daemon sent is read; a closed connection ends the view.
  void OnDaemon() {
    Result<bool> more = connected.client.ReadAvailable();
    if (!more || !*more) {
      End(more ? "the ptybox daemon closed the connection" : more.error().Describe(), 1);
    }
  }

  // This watch's output drawn, a resize redrawn from the session's new screen; its end ends the
  // view.
  void OnMessages() {
    while (std::optional<Json> message = connected.client.TakeMessage()) {
      const std::string method = message->value("method", std::string());
      const Json notice = message->value("params", Json::object());
      if (notice.value("watchId", int64_t{-1}) != watch_id) continue;
      if (method == "terminal_watch_output") {
        if (std::optional<std::string> bytes = Base64Decode(notice.value("data", ""))) {
          view.Feed(*bytes);
        }
      } else if (method == "terminal_watch_resized") {
        // The session's size changed: start again from its screen at the new size.
        view_slot.emplace(notice);
        view.SetTerminalSize(size.first, size.second);
        view.SetStatus(BaseStatus(watch, view, size, holding));
      } else if (method == "terminal_watch_ended") {
        End("the watch ended: " + Printable(notice.value("message", std::string()), 200), 1);
      }
    }
  }
};

}  // namespace

int ListSessions(const WatchFlags& flags, bool json) {
  std::optional<Connected> connected = ConnectFor("ls", flags);
  if (!connected) return 1;
  Result<Json> listed =
      connected->token
          ? connected->client.Call("owner_sessions", Json{{"ownerToken", *connected->token}})
          : connected->client.Call("terminal_list", Json::object());
  if (!listed) {
    std::cerr << "ptybox ls: " << listed.error().Describe() << "\n";
    return 1;
  }
  const Json sessions = listed->value("sessions", Json::array());
  if (json) {
    std::cout << Dump(Json{{"sessions", sessions}}) << "\n";
  } else {
    std::cout << SessionTable(sessions);
    if (!connected->token) {
      std::cerr << "ptybox ls: no owner token given and none kept for this directory: listed "
                   "this connection's own sessions; give --workspace DIR (where the agent's "
                   "`ptybox mcp --connect` runs) or --token-file FILE\n";
    }
  }
  return 0;
}

int AttachSession(const WatchFlags& flags, const std::string& session_id, bool write) {
  if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0) {
    std::cerr << "ptybox attach: standard input and output must be a terminal (attach draws the "
                 "session's screen there); use `ptybox ls` or terminal_read from scripts\n";
    return kExitUsage;
  }
  std::optional<Connected> connected = ConnectFor("attach", flags);
  if (!connected) return 1;
  Json params{{"sessionId", session_id}};
  if (connected->token) params["ownerToken"] = *connected->token;
  Result<Json> watch = connected->client.Call("terminal_watch", params);
  if (!watch) {
    std::cerr << "ptybox attach: " << watch.error().Describe() << "\n";
    return 1;
  }
  const int64_t watch_id = watch->value("watchId", int64_t{0});
  // Rebuilt in place when the session is resized (terminal_watch_resized).
  std::optional<AttachView> view_slot(std::in_place, *watch);
  AttachView& view = *view_slot;
  SignalPipe signals;
  if (Result<void> installed = signals.Install(); !installed) {
    std::cerr << "ptybox attach: " << installed.error().Describe() << "\n";
    return 1;
  }
  PersonTerminal terminal;
  if (Result<void> entered = terminal.Enter(); !entered) {
    std::cerr << "ptybox attach: " << entered.error().Describe() << "\n";
    return 1;
  }
  // --write: the session is taken over now, or (an agent's send is running) at the first key
  // after it settled; until then keys are refused with a status line, never queued.
  Attachment a(*connected, *watch, watch_id, write, view_slot);
  if (write) a.TakeOver();
  a.size = PersonTerminal::Size();
  view.SetTerminalSize(a.size.first, a.size.second);
  const std::string base = BaseStatus(*watch, view, a.size, a.holding);
  view.SetStatus(a.refusal.empty() ? base : " not taken over: " + a.refusal);
  PersonTerminal::Write(view.Draw());

  while (a.running) {
    std::array<pollfd, 3> fds{{{STDIN_FILENO, POLLIN, 0},
                               {connected->client.fd(), POLLIN, 0},
                               {signals.fd(), POLLIN, 0}}};
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      a.End(std::string("poll: ") + std::strerror(errno), 1);
      break;
    }
    if ((fds[2].revents & POLLIN) != 0) a.OnSignals(signals.fd());
    if (a.running && (fds[0].revents & (POLLIN | POLLHUP)) != 0) a.OnKeys();
    if (a.running && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) a.OnDaemon();
    // Every message received, also those a Call (--write) kept while it waited for its answer,
    // and the watch's end the daemon sent before it closed the connection.
    a.OnMessages();
    PersonTerminal::Write(view.Draw());
  }
  const std::string& ended = a.ended;
  const int exit_code = a.exit_code;
  if (exit_code == 0) {
    // Ignored: the daemon ends the watch anyway when this connection closes, a moment later.
    (void)connected->client.Send("terminal_unwatch", Json{{"watchId", watch_id}});
  }
  terminal.Restore();
  std::cerr << "ptybox attach: " << ended << "\n";
  return exit_code;
}

}  // namespace ptybox::runtime
