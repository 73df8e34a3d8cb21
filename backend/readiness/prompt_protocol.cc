#include "backend/readiness/prompt_protocol.h"

#include <charconv>
#include <cstdio>

#include "common/random.h"

namespace ptybox::backend {

std::string NewPromptNonce() { return RandomHex(16); }

std::string PromptHookCommand() {
  // Saves the shell options, then turns off what would echo or trace the hook (xtrace, verbose)
  // or run a DEBUG trap inside it (functrace): the function below restores them last. Traces
  // of these first commands go to stderr, which the group sends to /dev/null; a compound
  // command itself is never traced. It reads no `$?`: the prompt (PS1) does, after bash has
  // restored the status every PROMPT_COMMAND element may have changed.
  return "{ __ptybox_o=$-; set +xvT; __ptybox_prompt; } 2>/dev/null";
}

std::string PromptPs1(std::string_view nonce) {
  // Expanded by bash as it prints the prompt, after PROMPT_COMMAND and after the job-status
  // notices (`[1]+  Done ...`), so the marker is always next to "$ ". `$?` there is the status
  // of the last command line: bash saves it around every PROMPT_COMMAND element and restores
  // it, so a hook that does not keep `$?` cannot change what the marker says. `${PWD@Q}` is
  // the directory quoted by bash (control characters as `$'\n'`): no byte can end the OSC.
  std::string ps1 = "\\[\\e]";
  ps1 += kMarkerOscCode;
  ps1 += ";";
  ps1 += nonce;
  ps1 += ";$?;${PWD@Q}\\a\\]";
  ps1 += kPromptPs1;
  return ps1;
}

std::string PromptPs2(std::string_view nonce) {
  std::string ps2 = "\\[\\e]";
  ps2 += kMarkerOscCode;
  ps2 += ";";
  ps2 += nonce;
  ps2 += ";ps2\\a\\]";
  return ps2;
}

bool IsContinuationMarker(std::string_view payload, std::string_view nonce) {
  return payload.size() == kMarkerOscCode.size() + nonce.size() + 5 &&
         payload.starts_with(kMarkerOscCode) && payload[kMarkerOscCode.size()] == ';' &&
         payload.substr(kMarkerOscCode.size() + 1, nonce.size()) == nonce &&
         payload.ends_with(";ps2");
}

namespace {

// `text` as one single-quoted bash word.
std::string SingleQuoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

// Where the bootstrap gets its nonce from.
enum class NonceSource {
  kTerminal,    // the first shell's PROMPT_COMMAND: the line the daemon writes (NonceLine)
  kPulled,      // the code the daemon writes, after the nonce, into the typed loader's pipe
  kHandedOver,  // the rc file of a bash started by `exec bash` (BuildExecRc): descriptors
};

// The exec machinery (docs/readiness.md, "exec bash"), defined by every bootstrap. Nothing of it
// holds the nonce. `exec` is an alias ending in a blank, so the word after it is looked up as an
// alias too: `bash` there becomes `__ptybox_bash` with two here-strings (pipes: bash 5.1+ writes
// a here-document that fits the pipe into a pipe, never a file) and the launcher's options.
// `exec` never runs a function: it finds `__ptybox_bash` in the hash table (`hash -p`), the
// unreadable copy of bash (fd kExecCopyFd, confined sessions of a root daemon) or the bash the
// first shell runs. A plain `bash` (not after `exec`) runs the function, which closes the pipes
// and runs `bash` as before. `exec` with redirections alone stays the builtin.
static_assert(kExecRcFd == 10 && kExecPs1Fd == 11 && kExecRcCopyFd == 12,
              "the bash text of the exec machinery names these descriptors");

std::string ExecMachinery() {
  const std::string copy = "/proc/self/fd/" + std::to_string(kExecCopyFd);
  std::string code;
  // The target, once per image: the unreadable copy when this image holds it (executable, not
  // readable), else the bash this shell runs from ($BASH, an absolute path).
  // An image the launcher started from the copy after its descriptor 13 was closed (an
  // interactive login bash marks 3-19 close-on-exec) runs from it all the same: its own
  // executable, unreadable, is the copy.
  code +=
      "if [[ -x " + copy + " && -r " + copy + " ]]; then __ptybox_t=; elif [[ -x " + copy +
      " ]]; then __ptybox_t=" + copy +
      "; elif [[ -x /proc/self/exe && -r /proc/self/exe ]]; then __ptybox_t=; [[ $BASH == /* && "
      "-x $BASH ]] && __ptybox_t=$BASH; elif [[ -x /proc/self/exe ]]; then "
      "__ptybox_t=/proc/self/exe; else __ptybox_t=; fi; ";
  code += "(( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 )) || __ptybox_t=; ";
  code += "declare -gr __ptybox_t; ";
  // The launcher: a non-interactive bash in privileged mode (no BASH_ENV, no functions or
  // SHELLOPTS from the environment) that reads only its options. -l/--login, --norc,
  // --noprofile, -i: the new image with ptybox's rc file; anything else (a script, -c, other
  // options): bash from PATH with both pipes closed, without a nonce.
  std::string launch =
      "__l=0 __r=1 __p=1; for __a; do case $__a in -l|--login) __l=1;; --norc) __r=0;; "
      "--noprofile) __p=0;; -i) ;; *) exec 10<&- 11<&- bash \"$@\";; esac; done; "
      "IFS= read -r -d '' __s <&10; [[ -x $__T ]] || __T=/proc/self/exe; __a=bash; "
      "[[ $__T == /proc/* ]] || __a=$__T; "
      "__PTYBOX_EXEC=$__l$__r$__p exec -a \"$__a\" \"$__T\" --rcfile /proc/self/fd/10 -i "
      "12<<<\"$__s\" 10<<<\"$__s\"";
  code += "declare -gr __ptybox_launch=" + SingleQuoted(launch) + "; ";
  // A plain `bash`: the alias's words and pipes are dropped.
  code += "__ptybox_bash() { shift 4; command bash \"$@\" 12<&- 10<&- 11<&-; }; ";
  code += "declare -fr __ptybox_bash; ";
  return code;
}

// A repository's `.git/config` is the host's and read-only in a confined session (docs/sandbox.md,
// "Git in a session"); git then says only "could not lock config file" (exit 255, or 4 in newer
// gits). A `git` function of the interactive shell adds what to do instead when a `git config`
// without
// --global, --system or --file fails so. Its status is git's. Not read-only: the user's own `git`
// function replaces it; scripts (which do not get functions) see git's own message.
std::string GitConfigHint() {
  // No `!` anywhere: the text is also typed into a shell with history expansion on.
  return "git() { command git \"$@\"; local __ptybox_s=$?; "
         "if (( __ptybox_s == 4 || __ptybox_s == 255 )); then case \" $* \" in "
         "*' --global '*|*' --system '*|*' --file'*|*' -f '*) ;; *' config '*) \\printf '%s\\n' "
         "\"ptybox: this repository's .git/config is read-only in the sandbox; "
         "use git config --global (the session's own home: ~/.gitconfig)\" >&2;; esac; fi; "
         "return $__ptybox_s; }; ";
}

// What __ptybox_prompt re-asserts before every prompt (a user's `unalias -a` or `hash -r`).
std::string ExecArming() {
  return " [[ -n $__ptybox_t ]] && { alias exec='exec ' bash='__ptybox_bash 10<<<\"$__ptybox_rc\""
         " 11<<<\"$__ptybox_ps1\" -p -c \"__T=${__ptybox_t@Q}; $__ptybox_launch\" bash ';"
         " hash -p \"$__ptybox_t\" __ptybox_bash; };";
}

// The bootstrap, as the first PROMPT_COMMAND (kTerminal), as the code the daemon writes into the
// pipe of the loader it types into a re-exec'd bash (kPulled, BuildRebootstrapPayload) or as the
// start of the rc file of a bash started through the exec machinery (kHandedOver, BuildExecRc).
std::string BootstrapCode(NonceSource source, bool reexec_unreadable = false) {
  const bool pulled = source == NonceSource::kPulled;
  // The nonce is not here: this text is in bash's environment (/proc/<pid>/environ), which
  // other processes of the session may read. Bash reads the nonce from the terminal, where the
  // daemon writes it once before any other program runs in the session (NonceLine), and keeps
  // it only in a read-only variable of its own memory.
  //
  // The lasting hook sits at a high index of the PROMPT_COMMAND array (bash 5.1+ runs every
  // element): `PROMPT_COMMAND=...` or `PROMPT_COMMAND="x;$PROMPT_COMMAND"` by the user (or an
  // rc file) assigns element 0 and keeps it. It re-asserts PS1 (the marker) and PS2 (an
  // invisible continuation marker: the lines of a heredoc show no `> `). Kept free of forks: it
  // runs before every prompt.
  std::string fn;
  // MAILCHECK unset turns bash's mail check off: it runs after PROMPT_COMMAND, before PS1, and
  // expands its message (MAILPATH's `?text`, or a translation of the default one) as the shell,
  // command substitutions included, which leaves their status in `$?` (the sixth outside review
  // of the hook forged exitCode 42 so).
  fn += "__ptybox_prompt() { PS1=$__ptybox_ps1; PS2=$__ptybox_ps2; unset MAILCHECK;";
  fn += ExecArming();
  fn += " case ${__ptybox_o-} in *v*) set -v;; esac;";
  fn += " case ${__ptybox_o-} in *T*) set -T;; esac;";
  fn += " case ${__ptybox_o-} in *x*) unset __ptybox_o; set -x;; *) unset __ptybox_o;; esac; }";

  std::string code;
  if (pulled) {
    // Run by the typed loader (BuildRebootstrapLine), which has saved the options, silenced
    // tracing and read the nonce into __ptybox_n already.
    code += "{ unset __ptybox_c; ";
    if (reexec_unreadable) {
      // Only the unreadable copy may hold the nonce: without it, nothing is installed.
      const std::string copy = "/proc/self/fd/" + std::to_string(kExecCopyFd);
      code += "[[ -x " + copy + " ]] || __ptybox_n=; [[ -r " + copy + " ]] && __ptybox_n=; ";
    }
  } else {
    code += "{ __ptybox_o=$-; set +xvT; __ptybox_n=; ";
  }
  if (source == NonceSource::kHandedOver) {
    // The launcher's options; the controlled PS1 of the shell that ran `exec` (pipe 11), from
    // which the nonce is taken; this rc file's own text (pipe 12), kept for the next `exec`.
    // The pipes are closed before anything else runs.
    code += "__ptybox_m=${__PTYBOX_EXEC-}; unset __PTYBOX_EXEC; __ptybox_p=; __ptybox_r=; ";
    code += "IFS= \\read -r __ptybox_p <&11; IFS= \\read -r -d '' __ptybox_r <&12; ";
    code += "\\exec 12<&- 10<&- 11<&-; ";
    code += "[[ $__ptybox_p =~ " + std::string(kMarkerOscCode) +
            "\\;([0-9a-f]{32})\\; ]] && __ptybox_n=${BASH_REMATCH[1]}; BASH_REMATCH=(); ";
    code += "unset __ptybox_p; ";
    // No nonce came (a program of a dumpable session drained the pipe): nothing of the hook is
    // installed, so nothing read-only stands in the way of the bootstrap the daemon types in
    // danger-full-access; elsewhere exit codes stay null, never wrong.
    code +=
        "if [[ $__ptybox_n =~ ^[0-9a-f]{32}$ ]]; then "
        "declare -gr __ptybox_rc=${__ptybox_r%$'\\n'}; unset __ptybox_r; ";
  } else if (!pulled) {
    code += "IFS= read -r __ptybox_n; ";
  }
  code += "if [[ $__ptybox_n =~ ^[0-9a-f]{32}$ ]]; then declare -gr __ptybox_ps1=\"";
  // PromptPs1 with the nonce taken from the variable; inside double quotes `$?` and `${PWD@Q}`
  // stay unexpanded (escaped), the nonce is expanded now.
  std::string ps1 = PromptPs1("${__ptybox_n}");
  std::string escaped;
  for (size_t i = 0; i < ps1.size(); ++i) {
    if (ps1.compare(i, 13, "${__ptybox_n}") == 0) {
      escaped += "${__ptybox_n}";
      i += 12;
    } else if (ps1[i] == '$' || ps1[i] == '"' || ps1[i] == '`') {
      escaped += '\\';
      escaped += ps1[i];
    } else {
      escaped += ps1[i];
    }
  }
  code += escaped;
  code += "\" __ptybox_ps2=\"";
  code += PromptPs2("${__ptybox_n}");
  code += "\"; else declare -gr __ptybox_ps1='";
  code += kPromptPs1;
  code += "' __ptybox_ps2=; fi; unset __ptybox_n; ";
  if (source != NonceSource::kHandedOver) {
    // The rc file a bash started by `exec bash` gets (through a pipe, never a file).
    code += "declare -gr __ptybox_rc=" + SingleQuoted(BuildExecRc()) + "; ";
  }
  code += ExecMachinery();
  code += GitConfigHint();
  code += fn;
  // Read-only: code sourced into the shell (`. ./activate`) cannot redefine or unset the hook
  // (bash refuses, with "readonly function"), so it cannot make the hook print a marker with an
  // exit code of its choosing. It can still read the nonce (PS1 holds it) and replace the
  // PROMPT_COMMAND element: sourced code is the shell; this narrows, it does not close.
  code += "; declare -fr __ptybox_prompt";
  // At the start the environment's PROMPT_COMMAND is this bootstrap: replaced by the hook. A
  // re-exec'd shell's PROMPT_COMMAND is its rc files' (history -a, direnv): kept as element 0.
  code += source == NonceSource::kTerminal ? "; unset PROMPT_COMMAND; PROMPT_COMMAND["
                                           : "; PROMPT_COMMAND[";
  code += std::to_string(kPromptHookIndex);
  code += "]='";
  code += PromptHookCommand();
  code += "'; export -n PS1; set +H; unset HISTFILE; __ptybox_prompt";
  if (source == NonceSource::kHandedOver) {
    code += "; else case $__ptybox_o in *x*) set -x;; esac; unset __ptybox_o __ptybox_r; fi";
  }
  code += "; } 2>/dev/null";
  if (reexec_unreadable) {
    // This image runs a file its user can read, so it is dumpable: the nonce must not stay in
    // its memory. It execs the unreadable copy through the exec machinery at once, as `exec
    // bash` would (outside the group, whose stderr is /dev/null); the new image installs the
    // hook with the same nonce. Nothing runs in between: no other process can read it.
    // The new image rebuilds the shell's own state (functions, aliases) from the rc files, so
    // they run a second time: the login chain when this image is a login shell (`exec $SHELL
    // -l`), ~/.bashrc otherwise. No command substitution: nothing is forked while the nonce is
    // in this image.
    // An interactive login bash marks descriptors 3-19 close-on-exec: the launcher then runs
    // from the copy without descriptor 13 and starts the new image from its own executable.
    const std::string chain =
        "\\exec __ptybox_bash 10<<<\"$__ptybox_rc\" 11<<<\"$__ptybox_ps1\" -p -c "
        "\"__T=${__ptybox_t@Q}; $__ptybox_launch\" bash";
    code += "; if [[ $__ptybox_t == /proc/self/fd/" + std::to_string(kExecCopyFd) +
            " && $__ptybox_ps1 == *" + std::string(kMarkerOscCode) +
            "* ]]; then if \\shopt -q login_shell; then " + chain + " -l; else " + chain +
            "; fi; fi";
  }
  return code;
}

}  // namespace

std::string BuildPromptCommand() { return BootstrapCode(NonceSource::kTerminal); }

std::string BuildRebootstrapLine() {
  // Typed as a command line: bash put it into its history list before running it. It is taken
  // out again (unless HISTIGNORE may have kept it out: then the entry before it is not ours).
  // `\r ESC[K` erases what is left on the cursor's line (the new shell's own prompt when
  // readline did not move on). No alias can change a word below that starts with a backslash.
  //
  // Nothing secret crosses the terminal (a process outside the session may hold it): the line
  // makes a pipe only this shell holds, without a fork (a here-string: bash 5.1+ writes one that
  // fits into a pipe), reopens it read-write so that a read blocks until the daemon writes,
  // reads the here-string's empty line, then the nonce line and the NUL-ended code the daemon
  // writes into the pipe through /proc/<shell>/fd/11 once it sees the shell alone in the session
  // (rebootstrap.h, PullRefusal), and runs that code. The timeouts end the reads if the daemon
  // writes nothing. A reader that took part of this line leaves a line that either reads the
  // daemon's whole code from the pipe or reads nothing.
  const std::string fd = std::to_string(kExecPs1Fd);
  std::string line;
  line += "{ [[ -o history && -z ${HISTIGNORE-} ]] && \\history -d -1; } 2>/dev/null; ";
  line += "\\printf '\\r\\033[K'; ";
  // `|| :`: a read that times out must not end a shell whose rc file set errexit.
  line += "{ __ptybox_o=$-; set +xvT; __ptybox_n=; __ptybox_c=; \\exec " + fd + "<<<''; \\exec " +
          fd + "<>/proc/self/fd/" + fd + "; IFS= \\read -r -u " + fd +
          " __ptybox_n || :; IFS= \\read -r -t 10 -u " + fd +
          " __ptybox_n || :; IFS= \\read -r -d '' -t 10 -u " + fd + " __ptybox_c || :; \\exec " +
          fd + "<&-; } 2>/dev/null; \\eval \"$__ptybox_c\"\n";
  return line;
}

std::string BuildRebootstrapPayload(std::string_view nonce, bool reexec_unreadable) {
  std::string payload(nonce);
  payload += '\n';
  payload += BootstrapCode(NonceSource::kPulled, reexec_unreadable);
  payload += '\0';
  return payload;
}

std::string BuildExecRc() {
  // The hook first, with the nonce handed over; then the rc files bash would have read itself:
  // the login chain for -l (unless --noprofile), ~/.bashrc otherwise (unless --norc). Ends
  // with a command that succeeds: the first prompt's `$?` is this file's status.
  std::string rc = BootstrapCode(NonceSource::kHandedOver);
  rc +=
      "; case ${__ptybox_m-} in 1?1) [[ -r /etc/profile ]] && . /etc/profile; for __ptybox_f"
      " in ~/.bash_profile ~/.bash_login ~/.profile; do [[ -r $__ptybox_f ]] && { ."
      " \"$__ptybox_f\"; break; }; done;; 01?) [[ -r ~/.bashrc ]] && . ~/.bashrc;; esac;"
      " unset __ptybox_m __ptybox_f";
  return rc;
}

std::string NonceLine(std::string_view nonce) {
  std::string line(nonce);
  line += '\n';
  return line;
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

int OctalValue(char c) { return c >= '0' && c <= '7' ? c - '0' : -1; }

// One `$'...'` word of bash's ANSI-C quoting, from just after `$'`; advances `i` past the
// closing quote. Only the escapes bash's own quoting (`${v@Q}`) writes, and the usual ones.
bool DecodeAnsiC(std::string_view text, size_t& i, std::string& out) {
  while (i < text.size()) {
    char c = text[i++];
    if (c == '\'') return true;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i >= text.size()) return false;
    char e = text[i++];
    switch (e) {
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'e':
      case 'E':
        out.push_back('\x1b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\\':
      case '\'':
      case '"':
      case '?':
        out.push_back(e);
        break;
      case 'x': {
        int value = 0;
        int digits = 0;
        while (digits < 2 && i < text.size() && HexValue(text[i]) >= 0) {
          value = value * 16 + HexValue(text[i++]);
          ++digits;
        }
        if (digits == 0) return false;
        out.push_back(static_cast<char>(value));
        break;
      }
      default: {
        if (OctalValue(e) < 0) return false;
        int value = OctalValue(e);
        for (int digits = 1; digits < 3 && i < text.size() && OctalValue(text[i]) >= 0; ++digits) {
          value = value * 8 + OctalValue(text[i++]);
        }
        out.push_back(static_cast<char>(value & 0xff));
        break;
      }
    }
  }
  return false;  // no closing quote
}

// A word as bash's `${v@Q}` writes it: a sequence of '...' and $'...' words and \x escapes.
std::optional<std::string> DecodeBashQuoted(std::string_view text) {
  std::string out;
  size_t i = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    if (text[i] == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      out.append(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '\'') {
      i += 2;
      if (!DecodeAnsiC(text, i, out)) return std::nullopt;
    } else if (text[i] == '\\' && i + 1 < text.size()) {
      out.push_back(text[i + 1]);
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> DecodePromptDirectory(std::string_view field) {
  // The shell writes `${PWD@Q}` (starts with a quote); FormatPromptMarker (fakes, tests) and
  // older shells percent-encode an absolute path (starts with '/'). Empty (PWD unset) is
  // unknown.
  if (field.starts_with('\'') || field.starts_with("$'")) return DecodeBashQuoted(field);
  if (field.starts_with('/')) return PercentDecode(field);
  return std::nullopt;
}

bool LooksLikeBashPrompt(std::string_view line) {
  if (line.empty() || (line.back() != '$' && line.back() != '#')) return false;
  if (line.size() == 1) return true;  // PS1='$ ' (or `# `), as many rc files set it
  line.remove_suffix(1);
  for (unsigned char c : line) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  };
  // bash's default PS1, `\s-\v\$ `: "bash-5.2".
  if (line.starts_with("bash-") || line.starts_with("sh-")) {
    std::string_view version = line.substr(line.find('-') + 1);
    size_t dot = version.find('.');
    if (dot != std::string_view::npos && dot > 0 && dot + 1 < version.size() &&
        version.find_first_not_of("0123456789.") == std::string_view::npos) {
      return true;
    }
  }
  // `${debian_chroot:+($debian_chroot)}\u@\h:\w\$ `.
  if (line.starts_with('(')) {
    size_t close = line.find(')');
    if (close == std::string_view::npos) return false;
    line.remove_prefix(close + 1);
  }
  size_t at = line.find('@');
  if (at == 0 || at == std::string_view::npos) return false;
  size_t colon = line.find(':', at);
  if (colon == std::string_view::npos || colon == at + 1 || colon + 1 >= line.size()) return false;
  for (size_t i = 0; i < colon; ++i) {
    if (i != at && !name_char(line[i])) return false;
  }
  const char first = line[colon + 1];
  return first == '~' || first == '/';
}

std::optional<PromptMarker> ParsePromptMarker(std::string_view payload, std::string_view nonce) {
  // "6973;<nonce>;<exit>;<cwd>"
  auto take = [&payload]() -> std::optional<std::string_view> {
    size_t semi = payload.find(';');
    if (semi == std::string_view::npos) return std::nullopt;
    std::string_view field = payload.substr(0, semi);
    payload.remove_prefix(semi + 1);
    return field;
  };
  std::optional<std::string_view> code = take();
  if (!code || *code != kMarkerOscCode) return std::nullopt;
  std::optional<std::string_view> owner = take();
  if (!owner || *owner != nonce) return std::nullopt;
  std::optional<std::string_view> status = take();
  if (!status || status->empty()) return std::nullopt;
  PromptMarker marker;
  auto [end, ec] =
      std::from_chars(status->data(), status->data() + status->size(), marker.exit_code);
  if (ec != std::errc() || end != status->data() + status->size()) return std::nullopt;
  if (std::optional<std::string> cwd = DecodePromptDirectory(payload)) {
    marker.cwd = std::move(*cwd);
  } else {
    marker.cwd_known = false;
  }
  return marker;
}

std::string FormatPromptMarker(std::string_view nonce, int exit_code, std::string_view cwd) {
  std::string payload(kMarkerOscCode);
  payload += ';';
  payload += nonce;
  payload += ';';
  payload += std::to_string(exit_code);
  payload += ';';
  for (unsigned char c : cwd) {
    if (c < 0x20 || c == 0x7f || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      payload += buf;
    } else {
      payload.push_back(static_cast<char>(c));
    }
  }
  return payload;
}

PromptTracker::PromptTracker(std::string nonce, std::string ps1, Listener& listener)
    : nonce_(std::move(nonce)), ps1_(std::move(ps1)), listener_(listener) {}

void PromptTracker::Drop() {
  bool was_candidate = state_ == State::kCandidate;
  state_ = State::kNone;
  tail_.clear();
  if (was_candidate) listener_.OnInvalidated();
}

void PromptTracker::OnPrint(std::string_view utf8) {
  if (state_ == State::kNone) return;
  if (state_ == State::kCandidate || tail_.size() + utf8.size() > ps1_.size()) {
    Drop();
    return;
  }
  tail_.append(utf8);
  if (tail_ == ps1_) {
    state_ = State::kCandidate;
    listener_.OnCandidate();
  } else if (ps1_.compare(0, tail_.size(), tail_) != 0) {
    Drop();
  }
}

void PromptTracker::OnControl(char c) {
  if (state_ == State::kNone) return;
  if (c == '\a' || c == '\0') return;  // produce nothing on a terminal line
  Drop();
}

void PromptTracker::OnCsi(const CsiSequence& /*csi*/) {
  // Non-printing (bracketed-paste mode switches, colours): not part of the printable tail.
}

void PromptTracker::OnOsc(std::string_view payload) {
  if (IsContinuationMarker(payload, nonce_)) {
    Drop();
    listener_.OnContinuation();
    return;
  }
  std::optional<PromptMarker> marker = ParsePromptMarker(payload, nonce_);
  if (!marker) return;
  Drop();  // a new owned marker supersedes any earlier candidate
  marker_ = std::move(marker);
  state_ = State::kAfterMarker;
  tail_.clear();
  listener_.OnMarker(*marker_);
  if (ps1_.empty()) {
    state_ = State::kCandidate;
    listener_.OnCandidate();
  }
}

}  // namespace ptybox::backend
