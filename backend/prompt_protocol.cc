#include "backend/prompt_protocol.h"

#include "common/random.h"

#include <charconv>
#include <cstdio>

namespace ptybox::backend {

std::string NewPromptNonce() { return RandomHex(16); }

std::string PromptHookCommand() {
  // Captures $? and the shell options first, then turns off what would echo or trace the hook
  // (xtrace, verbose) or run a DEBUG trap inside it (functrace): the function below restores
  // them after the marker. Traces of these first commands go to stderr, which the group sends
  // to /dev/null; a compound command itself is never traced.
  return "{ __ptybox_s=$? __ptybox_o=$-; set +xvT; __ptybox_prompt; } 2>/dev/null";
}

std::string BuildPromptCommand(std::string_view nonce) {
  // Kept free of forks: it runs before every prompt. Control characters and '%' in the working
  // directory are percent-encoded so the OSC cannot be cut short by the path. The nonce lives
  // only in the function body, never in the text PROMPT_COMMAND holds after the first prompt,
  // so `set -v` (which echoes PROMPT_COMMAND) and a DEBUG trap's $BASH_COMMAND never show it.
  // The user's xtrace is restored last, so nothing is traced between the marker and PS1.
  std::string fn;
  fn += "__ptybox_prompt() { local __ptybox_p=${PWD-} __ptybox_q= __ptybox_i __ptybox_c;";
  fn += " if [[ $__ptybox_p == *[%[:cntrl:]]* ]]; then";
  fn += " for ((__ptybox_i=0; __ptybox_i<${#__ptybox_p}; __ptybox_i++)); do";
  fn += " __ptybox_c=${__ptybox_p:__ptybox_i:1};";
  fn += " case $__ptybox_c in [%[:cntrl:]]) printf -v __ptybox_c '%%%02X' \"'$__ptybox_c\";; esac;";
  fn += " __ptybox_q+=$__ptybox_c; done; __ptybox_p=$__ptybox_q; fi;";
  fn += " printf '\\033]";
  fn += kMarkerOscCode;
  fn += ";";
  fn += nonce;
  fn += ";%d;%s\\007' \"${__ptybox_s-0}\" \"$__ptybox_p\";";
  fn += " PS1='";
  fn += kPromptPs1;
  fn += "';";
  fn += " case ${__ptybox_o-} in *v*) set -v;; esac;";
  fn += " case ${__ptybox_o-} in *T*) set -T;; esac;";
  fn += " unset __ptybox_s;";
  fn += " case ${__ptybox_o-} in *x*) unset __ptybox_o; set -x;; *) unset __ptybox_o;; esac; }";

  // The first run (before any user input): define the function, swap PROMPT_COMMAND for the
  // short hook, keep both out of child shells, history expansion and the history file off.
  std::string code;
  code += "{ __ptybox_s=$? __ptybox_o=$-; set +xvT; ";
  code += fn;
  code += "; PROMPT_COMMAND='";
  code += PromptHookCommand();
  code += "'; export -n PROMPT_COMMAND PS1; set +H; unset HISTFILE; __ptybox_prompt; } 2>/dev/null";
  return code;
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

}  // namespace

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
  auto [end, ec] = std::from_chars(status->data(), status->data() + status->size(), marker.exit_code);
  if (ec != std::errc() || end != status->data() + status->size()) return std::nullopt;
  marker.cwd = PercentDecode(payload);
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
