#include "backend/readiness/foreground_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>

#include "backend/terminal/utf8.h"
#include "common/unique_fd.h"

namespace ptybox::backend {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
constexpr std::string_view kCut = "...";

// Length of the valid UTF-8 sequence starting at text[i], or 0.
size_t ValidSequence(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return 1;
  std::optional<Utf8Lead> lead = ClassifyUtf8Lead(b);
  if (!lead || text.size() - i - 1 < lead->need) return 0;
  for (size_t k = 1; k <= lead->need; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    const unsigned char lo = k == 1 ? lead->lower : 0x80;
    const unsigned char hi = k == 1 ? lead->upper : 0xbf;
    if (c < lo || c > hi) return 0;
  }
  return 1 + static_cast<size_t>(lead->need);
}

}  // namespace

std::string CommandLineText(std::string_view raw) {
  std::string out;
  bool cut = false;
  for (size_t i = 0; i < raw.size();) {
    std::string_view piece;
    size_t used = 1;
    char space = ' ';
    const auto b = static_cast<unsigned char>(raw[i]);
    if (b < 0x20 || b == 0x7f) {
      piece = std::string_view(&space, 1);
    } else if (size_t n = ValidSequence(raw, i); n > 0) {
      piece = raw.substr(i, n);
      used = n;
    } else {
      piece = kReplacement;
    }
    // The last piece may use the whole bound; an earlier one leaves room for "...".
    const bool last = i + used >= raw.size();
    const size_t limit =
        last ? kMaxForegroundCommandBytes : kMaxForegroundCommandBytes - kCut.size();
    if (out.size() + piece.size() > limit) {
      cut = true;
      break;
    }
    out.append(piece);
    i += used;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (cut) out.append(kCut);
  return out;
}

std::string ReadCommandLine(pid_t pid) {
  if (pid <= 0) return {};
  const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return {};
  // Enough for the bound with room for invalid bytes becoming three-byte replacements.
  std::array<char, 4 * kMaxForegroundCommandBytes> buffer{};
  size_t size = 0;
  while (size < buffer.size()) {
    const ssize_t n = ::read(fd.Get(), buffer.data() + size, buffer.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<size_t>(n);
  }
  return CommandLineText(std::string_view(buffer.data(), size));
}

}  // namespace ptybox::backend
