// Objects checked against their names (git_objects.h).
#include "sandbox/git_objects.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/propagate.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "sandbox/captured_run.h"

namespace ptybox::sandbox {
namespace {

struct DigestDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// The object header `<type> <size>\0` at the start of `inflated`: the size, or nullopt when it
// is malformed (`complete` false: not all of it has arrived yet).
std::optional<uint64_t> ParseHeader(std::string_view inflated, bool& complete, size_t& length) {
  complete = false;
  const size_t nul = inflated.find('\0');
  if (nul == std::string_view::npos) {
    complete = inflated.size() > 32;  // longer than any valid header: malformed
    return std::nullopt;
  }
  complete = true;
  length = nul + 1;
  const std::string_view header = inflated.substr(0, nul);
  const size_t space = header.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view type = header.substr(0, space);
  const std::string_view digits = header.substr(space + 1);
  if (type != "blob" && type != "tree" && type != "commit" && type != "tag") return std::nullopt;
  if (digits.empty() || digits.size() > 19 || (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  uint64_t size = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    size = size * 10 + static_cast<uint64_t>(c - '0');
  }
  return size;
}

// The first git among the absolute directories of the daemon's PATH, then /usr/bin.
std::optional<std::string> HostGit() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (dir.starts_with('/')) dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  dirs.emplace_back("/usr/bin");
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/git";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// The host's git run with `args` in an empty environment without the system's or a user's
// configuration (`env -i`: nothing but exec is safe between fork and exec in a threaded daemon),
// plus `env` ("K=V"). An error when there is no git; `what` says what it was for.
Result<CapturedRun> RunHostGit(const std::vector<std::string>& env,
                               const std::vector<std::string>& args, const CaptureOptions& options,
                               const std::string& what) {
  std::optional<std::string> git = HostGit();
  if (!git) {
    return Fail(ErrorKind::kInternal, "no git on the daemon's PATH or in /usr/bin to " + what +
                                          " with; install git on the host");
  }
  // No transport (GIT_ALLOW_PROTOCOL empty allows none): in a partial clone git fetches any
  // object it looks up and lacks from the promisor remote, running the repository's configured
  // ssh command or upload-pack as the daemon; each run here reads only what the host holds.
  std::vector<std::string> argv = {"/usr/bin/env",          "-i",
                                   "PATH=/usr/bin:/bin",    "HOME=/nonexistent",
                                   "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
                                   "GIT_ALLOW_PROTOCOL=",   "GIT_NO_LAZY_FETCH=1",
                                   "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(*git);
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCaptured(argv, options);
}

// What git said on stderr, without its last newline, as " (...)" for a message; empty if nothing.
std::string GitSaid(const CapturedRun& run) {
  std::string err = run.err.substr(0, 400);
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  return err.empty() ? std::string() : " (" + err + ")";
}

// What `git index-pack` may map beyond twice the pack's size (its code, libraries, buffers).
constexpr uint64_t kIndexPackMemoryBase = 512u << 20;

// OpenSSL frees its locks in an atexit handler by default; a launch's walk still hashing an
// index on its own thread when the daemon exits then read a freed lock (an ASan SEGV in
// EVP_Digest at a test daemon's exit). Initialised without that handler, before first use.
void InitCryptoOnce() {
  static const bool done = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  (void)done;
}

}  // namespace

std::string GitHashBytes(std::string_view data, size_t hash_size) {
  InitCryptoOnce();
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), sum, &size, hash_size == 32 ? EVP_sha256() : EVP_sha1(),
             nullptr);
  return std::string(reinterpret_cast<const char*>(sum), size);
}

namespace {

// LooseObjectMatchesName, handing what it inflates to `sink` when given: the type and size once
// the header is read, then the body in order. A false from the sink ends the read.
bool InflateLoose(int fd, uint64_t size, std::string_view id, std::string& why, uint64_t& budget,
                  bool& deferred, LooseObjectSink* sink) {
  deferred = false;
  const EVP_MD* kind = id.size() == 40 ? EVP_sha1() : id.size() == 64 ? EVP_sha256() : nullptr;
  if (kind == nullptr) {
    why = "not an object id";
    return false;
  }
  InitCryptoOnce();
  std::unique_ptr<EVP_MD_CTX, DigestDeleter> digest(EVP_MD_CTX_new());
  if (!digest || EVP_DigestInit_ex(digest.get(), kind, nullptr) != 1) {
    why = "cannot start a hash";
    return false;
  }
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) {
    why = "cannot start zlib";
    return false;
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> zs_end(&zs, inflateEnd);
  std::array<unsigned char, 1 << 16> in{};
  std::array<unsigned char, 1 << 16> out{};
  std::string header;  // the inflated bytes until the header's NUL
  std::optional<uint64_t> declared;
  uint64_t body = 0;  // bytes after the header
  uint64_t offset = 0;
  bool ended = false;
  while (offset < size) {
    const ssize_t n = ::pread(fd, in.data(), std::min<uint64_t>(in.size(), size - offset),
                              static_cast<off_t>(offset));
    if (n <= 0) {
      why = n == 0 ? "shorter than it was" : "cannot be read";
      return false;
    }
    offset += static_cast<uint64_t>(n);
    if (ended) {
      why = "has data after its zlib stream";
      return false;
    }
    zs.next_in = in.data();
    zs.avail_in = static_cast<uInt>(n);
    while (zs.avail_in != 0 && !ended) {
      zs.next_out = out.data();
      zs.avail_out = static_cast<uInt>(out.size());
      const int rc = inflate(&zs, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END) {
        why = "is not a zlib stream (" + std::string(zs.msg != nullptr ? zs.msg : "corrupt") + ")";
        return false;
      }
      ended = rc == Z_STREAM_END;
      std::string_view produced(reinterpret_cast<const char*>(out.data()),
                                out.size() - zs.avail_out);
      if (!declared) {
        const size_t had = header.size();
        header.append(produced.substr(0, 64));
        bool complete = false;
        size_t length = 0;
        declared = ParseHeader(header, complete, length);
        if (!declared) {
          if (complete) {
            why = "has no valid object header";
            return false;
          }
          produced = {};
        } else {
          produced.remove_prefix(length - had);
          if (*declared > kGitRatioFloor &&
              *declared / std::max<uint64_t>(size, 1) > kGitInflateRatioMax) {
            why = "declares " + std::to_string(*declared) + " bytes from a file of " +
                  std::to_string(size) + ": more than " + std::to_string(kGitInflateRatioMax) +
                  " times its size";
            return false;
          }
          if (*declared > budget) {
            why = "left for the next copy-back: this one inflated its " +
                  std::to_string(kGitInflateBudget >> 20) + " MiB already";
            deferred = true;
            return false;
          }
          budget -= *declared;
          if (EVP_DigestUpdate(digest.get(), header.data(), length) != 1) return false;
          if (sink != nullptr &&
              !sink->Header(std::string_view(header).substr(0, header.find(' ')), *declared)) {
            why = "could not be written into the pack that checks it";
            return false;
          }
        }
      }
      body += produced.size();
      if (declared && (body > *declared || *declared > kGitInflatedObjectMax)) {
        why = "inflates past the size its header declares";
        return false;
      }
      if (!produced.empty() &&
          EVP_DigestUpdate(digest.get(), produced.data(), produced.size()) != 1) {
        return false;
      }
      if (sink != nullptr && !produced.empty() && !sink->Body(produced)) {
        why = "could not be written into the pack that checks it";
        return false;
      }
    }
    if (ended && zs.avail_in != 0) {
      why = "has data after its zlib stream";
      return false;
    }
  }
  if (!ended || !declared || body != *declared) {
    why = "is a truncated object";
    return false;
  }
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned int sum_size = 0;
  if (EVP_DigestFinal_ex(digest.get(), sum, &sum_size) != 1) return false;
  const std::string actual =
      HexEncode(std::string_view(reinterpret_cast<const char*>(sum), sum_size));
  if (actual != id) {
    why = "holds the object " + actual + ", not the one its name says";
    return false;
  }
  return true;
}

}  // namespace

bool LooseObjectMatchesName(int fd, uint64_t size, std::string_view id, std::string& why,
                            uint64_t& budget, bool& deferred) {
  return InflateLoose(fd, size, id, why, budget, deferred, nullptr);
}

namespace {

// Finds whether an object names `target` (hex): a commit's `tree` and `parent` lines, a
// tag's `object` line (its header, to the first empty line, however long), a tree's entries. Byte
// by byte, holding no more than one link line or one id: a name or a header line of any length
// is skipped, not kept.
class LinkFinder final : public LooseObjectSink {
 public:
  explicit LinkFinder(std::string_view target_hex)
      : hex_(target_hex), id_size_(target_hex.size() / 2) {}
  bool Header(std::string_view type, uint64_t /*size*/) override {
    tree_ = type == "tree";
    done_ = type == "blob";  // a blob names nothing
    return true;
  }
  bool Body(std::string_view bytes) override {
    for (const char c : bytes) {
      if (found_ || done_) break;
      if (tree_) {
        TreeByte(c);
      } else {
        HeaderByte(c);
      }
    }
    return true;
  }
  [[nodiscard]] bool found() const { return found_; }

 private:
  // `<mode> <name>\0<id>` after another.
  void TreeByte(char c) {
    if (!in_id_) {
      if (c == '\0') {
        in_id_ = true;
        id_.clear();
      }
      return;
    }
    id_.push_back(c);
    if (id_.size() < id_size_) return;
    found_ = HexEncode(id_) == hex_;
    in_id_ = false;
  }
  // `<key> <value>\n` lines until an empty one.
  void HeaderByte(char c) {
    if (skipping_) {
      skipping_ = c != '\n';
      return;
    }
    if (c != '\n') {
      line_.push_back(c);
      // Longer than any link line: the rest of it is not kept.
      if (line_.size() > std::string_view("parent ").size() + hex_.size()) {
        skipping_ = true;
        line_.clear();
      }
      return;
    }
    if (line_.empty()) {
      done_ = true;  // the header's end
      return;
    }
    for (const char* key : {"tree ", "parent ", "object "}) {
      if (line_ == key + hex_) found_ = true;
    }
    line_.clear();
  }

  std::string hex_;
  size_t id_size_;    // raw bytes of an id in a tree entry
  std::string id_;    // a tree entry's id, as it arrives
  std::string line_;  // a header line, as it arrives
  bool tree_ = false;
  bool in_id_ = false;
  bool skipping_ = false;
  bool done_ = false;
  bool found_ = false;
};

}  // namespace

bool LooseObjectLinksTo(int fd, uint64_t size, std::string_view id, std::string_view target,
                        uint64_t& budget) {
  LinkFinder finder(target);
  std::string why;
  bool deferred = false;
  return InflateLoose(fd, size, id, why, budget, deferred, &finder) && finder.found();
}

namespace {

// Writes one object into a pack from its header on: the entry's type and size, then the body
// deflated, at `offset` of `fd` (moved past what it wrote).
class PackEntryWriter final : public LooseObjectSink {
 public:
  PackEntryWriter(int fd, uint64_t offset) : fd_(fd), offset_(offset) {}
  PackEntryWriter(const PackEntryWriter&) = delete;
  PackEntryWriter& operator=(const PackEntryWriter&) = delete;
  ~PackEntryWriter() override {
    if (started_) deflateEnd(&zs_);
  }

  bool Header(std::string_view type, uint64_t size) override {
    const int code = type == "commit" ? 1 : type == "tree" ? 2 : type == "blob" ? 3 : 4;
    // The pack's entry header: type and the size's low 4 bits, then 7 bits a byte, the high bit
    // of each byte saying another follows.
    std::array<unsigned char, 16> head{};
    size_t n = 0;
    head[0] = static_cast<unsigned char>((code << 4) | (size & 0x0f));
    for (uint64_t rest = size >> 4; rest != 0; rest >>= 7) {
      head[n++] |= 0x80;
      head[n] = static_cast<unsigned char>(rest & 0x7f);
    }
    if (!Write(head.data(), n + 1)) return false;
    if (deflateInit(&zs_, Z_BEST_SPEED) != Z_OK) return false;
    started_ = true;
    return true;
  }
  bool Body(std::string_view bytes) override { return Deflate(bytes, Z_NO_FLUSH); }
  // Ends the entry's zlib stream; false when nothing was started or a write failed.
  bool End() { return started_ && Deflate({}, Z_FINISH); }
  [[nodiscard]] uint64_t offset() const { return offset_; }

 private:
  bool Deflate(std::string_view bytes, int flush) {
    std::array<unsigned char, 1 << 16> out{};
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs_.avail_in = static_cast<uInt>(bytes.size());
    for (;;) {
      zs_.next_out = out.data();
      zs_.avail_out = static_cast<uInt>(out.size());
      const int rc = deflate(&zs_, flush);
      if (rc == Z_STREAM_ERROR) return false;
      if (!Write(out.data(), out.size() - zs_.avail_out)) return false;
      if (flush == Z_FINISH ? rc == Z_STREAM_END : zs_.avail_out != 0) return true;
    }
  }
  bool Write(const unsigned char* data, size_t size) {
    while (size != 0) {
      const ssize_t n = ::pwrite(fd_, data, size, static_cast<off_t>(offset_));
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
      offset_ += static_cast<uint64_t>(n);
    }
    return true;
  }

  int fd_;
  uint64_t offset_;
  z_stream zs_{};
  bool started_ = false;
};

constexpr uint64_t kPackHeaderSize = 12;

}  // namespace

LooseObjectPack::LooseObjectPack(int fd, size_t hash_size)
    : fd_(fd), hash_size_(hash_size), end_(kPackHeaderSize) {}

bool LooseObjectPack::Append(int loose_fd, uint64_t size, std::string_view id, std::string& why,
                             uint64_t& budget, bool& deferred) {
  PackEntryWriter writer(fd_, end_);
  if (!InflateLoose(loose_fd, size, id, why, budget, deferred, &writer) || !writer.End()) {
    if (why.empty()) why = "could not be written into the pack that checks it";
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) failed_ = true;
    return false;
  }
  end_ = writer.offset();
  ++count_;
  return true;
}

Result<void> LooseObjectPack::Finish() {
  if (failed_) return Fail(ErrorKind::kInternal, "the pack of loose objects could not be cut back");
  const std::array<unsigned char, kPackHeaderSize> head = {'P',
                                                           'A',
                                                           'C',
                                                           'K',
                                                           0,
                                                           0,
                                                           0,
                                                           2,  // version 2
                                                           static_cast<unsigned char>(count_ >> 24),
                                                           static_cast<unsigned char>(count_ >> 16),
                                                           static_cast<unsigned char>(count_ >> 8),
                                                           static_cast<unsigned char>(count_)};
  if (::pwrite(fd_, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kInternal, "pwrite", "the pack of loose objects"));
  }
  // The trailer: the hash of everything before it.
  InitCryptoOnce();
  std::unique_ptr<EVP_MD_CTX, DigestDeleter> digest(EVP_MD_CTX_new());
  if (!digest ||
      EVP_DigestInit_ex(digest.get(), hash_size_ == 32 ? EVP_sha256() : EVP_sha1(), nullptr) != 1) {
    return Fail(ErrorKind::kInternal, "cannot start a hash");
  }
  std::array<unsigned char, 1 << 16> buffer{};
  for (uint64_t at = 0; at < end_;) {
    const ssize_t n = ::pread(fd_, buffer.data(), std::min<uint64_t>(buffer.size(), end_ - at),
                              static_cast<off_t>(at));
    if (n <= 0) {
      return std::unexpected(
          Error::FromErrno(ErrorKind::kInternal, "pread", "the pack of loose objects"));
    }
    if (EVP_DigestUpdate(digest.get(), buffer.data(), static_cast<size_t>(n)) != 1) {
      return Fail(ErrorKind::kInternal, "cannot hash the pack");
    }
    at += static_cast<uint64_t>(n);
  }
  unsigned int sum_size = 0;
  if (EVP_DigestFinal_ex(digest.get(), buffer.data(), &sum_size) != 1) {
    return Fail(ErrorKind::kInternal, "cannot hash the pack");
  }
  if (::pwrite(fd_, buffer.data(), sum_size, static_cast<off_t>(end_)) !=
      static_cast<ssize_t>(sum_size)) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kInternal, "pwrite", "the pack of loose objects"));
  }
  return {};
}

Result<IndexedPack> IndexPack(const std::filesystem::path& pack, size_t hash_size,
                              int host_git_fd) {
  const std::filesystem::path idx = std::filesystem::path(pack).replace_extension(".idx");
  CaptureOptions options;
  options.timeout = std::chrono::minutes(10);
  options.max_capture = 64 * 1024;
  options.keep_fds = {host_git_fd};
  // git resolves each delta in memory: a 16 KiB pack whose delta makes a 1 GiB object took 1 GiB
  // of root's memory. Its address space is bounded by what an honest pack of this size needs.
  std::error_code size_error;
  const uint64_t pack_size = std::filesystem::file_size(pack, size_error);
  const rlim_t limit = static_cast<rlim_t>((kIndexPackMemoryBase + 2 * pack_size));
  options.before_exec = [limit]() -> std::optional<ChildFailure> {
    const struct rlimit bound { limit, limit };
    if (::setrlimit(RLIMIT_AS, &bound) != 0) return ChildFailure{ChildStage::kExec, errno};
    return std::nullopt;
  };
  // In the host's repository, by descriptor: git reads the person's configuration and objects
  // (a tree's `.gitmodules` blob the host already has is checked with it), never the session's.
  // `--strict` holds every object to git's fsck rules as a receiving server does, warnings as
  // errors (a commit without a tree, a tree naming a file twice: outside review 38), and every
  // object an object names must be in the pack or the repository, of the type it is named as
  // (a tag or tree entry calling the person's commit a blob; a tree whose `.gitmodules` never
  // came: outside review 39).
  Result<CapturedRun> run =
      RunHostGit({},
                 {"--git-dir=/proc/self/fd/" + std::to_string(host_git_fd), "index-pack",
                  "--strict", hash_size == 32 ? "--object-format=sha256" : "--object-format=sha1",
                  "-o", idx.string(), pack.string()},
                 options, "check the pack");
  if (!run) return Propagate(run);
  if (!run->Succeeded()) {
    std::error_code ec;
    std::filesystem::remove(idx, ec);
    // A run cut short judged nothing: not a refusal of the pack's objects.
    if (run->timed_out) return Fail(ErrorKind::kInternal, "git index-pack ran past 10 minutes");
    return Fail(ErrorKind::kPolicyDenied, "git index-pack refused it" + GitSaid(*run));
  }
  // The pack's name is the last line: fsck prints before it the `.gitmodules` blobs the pack
  // names and neither holds nor finds in the repository.
  IndexedPack indexed;
  std::string_view out(run->out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.remove_suffix(1);
  indexed.name = std::string(out.substr(out.find_last_of("\r\n") + 1));
  if (indexed.name.starts_with("pack\t")) indexed.name.erase(0, 5);
  if (indexed.name.size() != hash_size * 2) {
    return Fail(ErrorKind::kInternal, "git index-pack printed no pack name: " + run->out);
  }
  UniqueFd fd(::open(idx.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  std::error_code ec;
  if (!fd) return Fail(ErrorKind::kInternal, "git index-pack wrote no index at " + idx.string());
  std::string bytes;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(fd.Get(), buffer, sizeof buffer)) > 0;) bytes.append(buffer, n);
  std::filesystem::remove(idx, ec);
  indexed.idx = std::move(bytes);
  return indexed;
}

namespace {

// The host's git on its own repository (its configuration is the person's), read by
// descriptor (`host_git_fd`, kept at its number): nothing here runs a hook or looks at the
// worktree. `stdin_fd`, when given, is its standard input.
Result<CapturedRun> RunOnHostRepository(int host_git_fd, std::vector<std::string> args,
                                        std::chrono::milliseconds timeout, size_t max_capture,
                                        const std::string& what, int stdin_fd = -1,
                                        const std::string& below = "") {
  CaptureOptions options;
  options.timeout = timeout;
  options.max_capture = max_capture;
  options.keep_fds = {host_git_fd};
  if (stdin_fd >= 0) {
    options.before_exec = [stdin_fd]() -> std::optional<ChildFailure> {
      if (::dup2(stdin_fd, 0) != 0) return ChildFailure{ChildStage::kExec, errno};
      return std::nullopt;
    };
  }
  args.insert(args.begin(), "--git-dir=/proc/self/fd/" + std::to_string(host_git_fd) + "/" + below);
  return RunHostGit({}, args, options, what);
}

}  // namespace

Result<size_t> HostHashSize(int host_git_fd) {
  Result<CapturedRun> run =
      RunOnHostRepository(host_git_fd, {"rev-parse", "--show-object-format"},
                          std::chrono::seconds(10), 64, "read the repository's object format");
  if (!run) return Propagate(run);
  if (run->Succeeded() && run->out.starts_with("sha256")) return size_t{32};
  if (run->Succeeded() && run->out.starts_with("sha1")) return size_t{20};
  return Fail(ErrorKind::kPolicyDenied,
              "the host's git could not tell the repository's object format" + GitSaid(*run));
}

bool HostSparseCheckout(int host_git_fd, const std::string& dir) {
  Result<CapturedRun> run = RunOnHostRepository(
      host_git_fd,
      {"config", "--type=bool", "--get-regexp",
       "^(core\\.sparsecheckout|sparse\\.expectfilesoutsideofpatterns)$"},
      std::chrono::seconds(10), 4096, "read whether the worktree is a sparse checkout", -1, dir);
  if (!run || !run->Succeeded()) return false;  // none set (exit 1), or git could not say
  bool sparse = false;
  bool expect_outside = false;
  std::string_view out(run->out);
  while (!out.empty()) {  // the last value of each wins, as git reads them
    const size_t end = std::min(out.find('\n'), out.size());
    const std::string_view line = out.substr(0, end);
    out.remove_prefix(std::min(end + 1, out.size()));
    if (line == "core.sparsecheckout true") sparse = true;
    if (line == "core.sparsecheckout false") sparse = false;
    if (line == "sparse.expectfilesoutsideofpatterns true") expect_outside = true;
    if (line == "sparse.expectfilesoutsideofpatterns false") expect_outside = false;
  }
  return sparse && !expect_outside;
}

Result<std::string> HostObjectType(int host_git_fd, std::string_view id) {
  Result<CapturedRun> run =
      RunOnHostRepository(host_git_fd, {"cat-file", "-t", std::string(id)},
                          std::chrono::seconds(10), 64, "read an object's type");
  if (!run) return Propagate(run);
  std::string type = run->out;
  while (!type.empty() && (type.back() == '\n' || type.back() == '\r')) type.pop_back();
  if (!run->Succeeded() || type.empty()) {
    return Fail(ErrorKind::kPolicyDenied, "the host's git could not read its type" + GitSaid(*run));
  }
  return type;
}

Result<std::string> HostTreeOf(int host_git_fd, std::string_view commit) {
  Result<CapturedRun> run = RunOnHostRepository(
      host_git_fd, {"rev-parse", "--verify", "-q", std::string(commit) + "^{tree}"},
      std::chrono::seconds(10), 160, "read a commit's tree");
  if (!run) return Propagate(run);
  std::string tree = run->out;
  while (!tree.empty() && (tree.back() == '\n' || tree.back() == '\r')) tree.pop_back();
  if (!run->Succeeded() || (tree.size() != 40 && tree.size() != 64)) {
    return Fail(ErrorKind::kPolicyDenied,
                "the host's git could not read the commit's tree" + GitSaid(*run));
  }
  return tree;
}

Result<bool> HostRefHasTree(int host_git_fd, std::string_view tree) {
  // A line per branch, tag and remote branch (where a `git switch` or `checkout` goes; not the
  // stash, whose tree is the index `git stash apply --index` leaves: outside review 52): `<tree>`
  // for a commit's, `<tag's target's tree>` for an annotated tag's. At most kGitMaxRefs refs are
  // ever read at a launch (about 6.5 MiB of lines here).
  Result<CapturedRun> run = RunOnHostRepository(
      host_git_fd,
      {"for-each-ref", "--format=%(tree)%(*tree)", "refs/heads", "refs/tags", "refs/remotes"},
      std::chrono::seconds(20), 16u << 20, "list the refs' trees");
  if (!run) return Propagate(run);
  if (!run->Succeeded()) {
    return Fail(ErrorKind::kPolicyDenied,
                "the host's git could not list its refs' trees" + GitSaid(*run));
  }
  std::string_view rest(run->out);
  for (size_t end; !rest.empty();
       rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1)) {
    end = rest.find('\n');
    if (rest.substr(0, end) == tree) return true;
  }
  return false;
}

Result<std::map<std::string, std::string>> HostObjectTypes(int host_git_fd,
                                                           const std::vector<std::string>& ids) {
  std::map<std::string, std::string> types;
  if (ids.empty()) return types;
  // The ids go in on the child's stdin, from a file only this process holds (no pipe to feed
  // while the output is read).
  UniqueFd input(static_cast<int>(::memfd_create("ptybox-ids", MFD_CLOEXEC)));
  if (!input) return Fail(ErrorKind::kInternal, "memfd_create for the object ids failed");
  std::string text;
  for (const std::string& id : ids) text.append(id).push_back('\n');
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(input.Get(), text.data() + done, text.size() - done);
    if (n <= 0) return Fail(ErrorKind::kInternal, "writing the object ids failed");
    done += static_cast<size_t>(n);
  }
  if (::lseek(input.Get(), 0, SEEK_SET) != 0) {
    return Fail(ErrorKind::kInternal, "rewinding the object ids failed");
  }
  Result<CapturedRun> run =
      RunOnHostRepository(host_git_fd, {"cat-file", "--batch-check"}, std::chrono::seconds(20),
                          ids.size() * 96 + 64, "read the objects' types", input.Get());
  if (!run) return Propagate(run);
  if (!run->Succeeded()) {
    return Fail(ErrorKind::kPolicyDenied,
                std::string(run->timed_out ? "the host's git took too long reading the objects"
                                           : "the host's git could not read the objects") +
                    GitSaid(*run));
  }
  // `<id> <type> <size>`, or `<id> missing`, a line per id in order.
  std::string_view rest(run->out);
  for (size_t end; !rest.empty();
       rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1)) {
    end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view after = line.substr(space + 1);
    types[std::string(line.substr(0, space))] = std::string(after.substr(0, after.find(' ')));
  }
  return types;
}

Result<std::optional<std::string>> CommitAddsGitlink(int host_git_fd, std::string_view tip,
                                                     std::chrono::milliseconds timeout,
                                                     bool& timed_out) {
  timed_out = false;
  const size_t max_capture = 16u << 20;
  Result<CapturedRun> run = RunOnHostRepository(
      host_git_fd,
      {"log", "--no-show-signature", "--raw", "-r", "-m", "--root", "--no-renames", "--no-abbrev",
       "--format=commit %H", std::string(tip) + "^{commit}", "--not", "--all"},
      timeout, max_capture, "check the commit");
  if (!run) return Propagate(run);
  if (run->timed_out) {
    timed_out = true;
    return Fail(ErrorKind::kPolicyDenied, "the host's git could not list its new commits within " +
                                              std::to_string(timeout.count() / 1000) + " s");
  }
  if (!run->Succeeded() || run->out.size() >= max_capture) {
    return Fail(ErrorKind::kPolicyDenied,
                "not a commit, or the host's git could not list its new commits" + GitSaid(*run));
  }
  std::string commit;
  std::string_view rest(run->out);
  for (size_t end; !rest.empty();
       rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1)) {
    end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (line.starts_with("commit ")) {
      commit = std::string(line.substr(7));
      continue;
    }
    // `:<old mode> <new mode> <old id> <new id> <status>\t<path>`
    if (!line.starts_with(':') || line.size() < 15) continue;
    const std::string_view old_mode = line.substr(1, 6);
    const std::string_view new_mode = line.substr(8, 6);
    if (new_mode == "160000" && old_mode != "160000") {
      const size_t tab = line.find('\t');
      return std::optional<std::string>(
          std::string(tab == std::string_view::npos ? line : line.substr(tab + 1)) +
          " (in commit " + commit + ")");
    }
  }
  return std::optional<std::string>();
}

Result<std::vector<std::string>> ObjectsNoHostRefReaches(int host_git_fd, std::string_view tip,
                                                         std::chrono::milliseconds timeout,
                                                         bool& timed_out) {
  timed_out = false;
  const size_t max_capture = kGitObjectsNewAtTipMax * 65 + 1;
  Result<CapturedRun> run = RunOnHostRepository(
      host_git_fd,
      {"rev-list", "--objects", "--no-object-names", std::string(tip), "--not", "--all"}, timeout,
      max_capture, "list the objects a ref makes reachable");
  if (!run) return Propagate(run);
  if (run->timed_out) {
    timed_out = true;
    return Fail(ErrorKind::kPolicyDenied, "the host's git could not list its new objects within " +
                                              std::to_string(timeout.count() / 1000) + " s");
  }
  if (!run->Succeeded()) {
    return Fail(ErrorKind::kPolicyDenied,
                "the host's git could not list the objects it makes reachable" + GitSaid(*run));
  }
  std::vector<std::string> ids;
  std::string_view rest(run->out);
  for (size_t end; !rest.empty();
       rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1)) {
    end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (line.empty()) continue;
    if (ids.size() == kGitObjectsNewAtTipMax || run->out.size() >= max_capture) {
      return Fail(ErrorKind::kPolicyDenied,
                  "it makes more than " + std::to_string(kGitObjectsNewAtTipMax) +
                      " objects reachable that no ref of the host's reaches; make that branch "
                      "on the host");
    }
    ids.emplace_back(line.substr(0, line.find(' ')));
  }
  return ids;
}

}  // namespace ptybox::sandbox
