// Host facts for the walls: run-time directories, home directories, hidden paths.
#include "sandbox/host_walls.h"

#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "common/log.h"
#include "policy/schema.h"

namespace ptybox::sandbox {
namespace fs = std::filesystem;

namespace {

void AddUnique(std::vector<fs::path>& paths, fs::path path) {
  if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(std::move(path));
}

}  // namespace

std::vector<fs::path> HostRunDirs() {
  std::vector<fs::path> dirs;
  for (const char* name : {"/run", "/var/run"}) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(name, ec);
    if (ec || !fs::is_directory(canonical, ec)) continue;
    // A run directory inside another granted location would be odd; the root is never one.
    if (canonical == "/") continue;
    AddUnique(dirs, canonical);
  }
  return dirs;
}

namespace {

// Adds the home directory `dir` (canonical) to `homes` once; nothing for a relative or missing
// one, or "/" (daemon users, nobody's /nonexistent), which is not a home worth expanding into.
void AddHomeDirectory(std::vector<fs::path>& homes, const char* dir) {
  if (dir == nullptr || dir[0] != '/') return;
  std::error_code ec;
  fs::path canonical = fs::canonical(dir, ec);
  if (ec || canonical == "/" || !fs::is_directory(canonical, ec)) return;
  AddUnique(homes, std::move(canonical));
}

}  // namespace

std::vector<fs::path> HomeDirectories() {
  std::vector<fs::path> homes;
  auto add = [&](const char* dir) { AddHomeDirectory(homes, dir); };
  add(std::getenv("HOME"));
  // getpwent keeps process-wide state: one walk at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  ::setpwent();
  while (passwd* entry = ::getpwent()) add(entry->pw_dir);
  ::endpwent();
  return homes;
}

std::optional<fs::path> PerUserRuntimeDirectory() {
  const uid_t uid = ::geteuid();
  if (uid == 0) return fs::path("/run/ptybox");
  auto owned_directory = [uid](const fs::path& dir) {
    struct stat st {};
    return dir.is_absolute() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
           st.st_uid == uid;
  };
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && owned_directory(xdg)) {
    return fs::path(xdg) / "ptybox";
  }
  const fs::path run_user = "/run/user/" + std::to_string(uid);
  if (owned_directory(run_user)) return run_user / "ptybox";
  return std::nullopt;
}

namespace {

// ASCII letters folded to lower case: a home on a case-insensitive (casefold) directory finds
// `~/.SSH` when `.ssh` is looked up, so the listing is compared without case and the stat that
// follows decides.
std::string FoldCase(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// The names directly inside `dir`, case folded, or nothing when it cannot be listed.
std::optional<std::set<std::string>> NamesIn(const fs::path& dir) {
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return std::nullopt;
  std::set<std::string> names;
  while (const dirent* entry = ::readdir(listing)) names.insert(FoldCase(entry->d_name));
  ::closedir(listing);
  return names;
}

// `home / relative`, unless the home's listing shows its first component is not there in any
// case (then the path cannot exist). Without a listing (a home we may search but not read) it is
// kept.
void AddHomeCandidate(std::vector<fs::path>& candidates, const fs::path& home,
                      const std::optional<std::set<std::string>>& names,
                      const std::string& relative) {
  const std::string first = FoldCase(relative.substr(0, relative.find('/')));
  if (names && !first.empty() && !names->contains(first)) return;
  candidates.push_back(home / relative);
}

}  // namespace

std::vector<HiddenPath> CollectHiddenPaths(const std::vector<std::string>& patterns,
                                           const std::vector<fs::path>& homes) {
  // About 80 patterns under every home of the host, most of them absent: each home is listed
  // once instead of looking for every pattern in it.
  std::vector<std::optional<std::set<std::string>>> listings;
  for (const fs::path& home : homes) listings.push_back(NamesIn(home));
  std::vector<fs::path> candidates;
  for (const std::string& pattern : patterns) {
    if (pattern.starts_with("~/")) {
      for (size_t i = 0; i < homes.size(); ++i) {
        AddHomeCandidate(candidates, homes[i], listings[i], pattern.substr(2));
      }
    } else if (!pattern.empty() && pattern[0] == '/') {
      candidates.emplace_back(pattern);
    }
  }
  std::vector<HiddenPath> hidden;
  for (const fs::path& candidate : candidates) {
    // A candidate that does not exist: one stat tells, where resolving the path first costs a
    // readlink per component. A path that does not exist now has no canonical form either, so
    // nothing is skipped that the resolution would have kept.
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0) continue;
    std::error_code ec;
    fs::path canonical = fs::canonical(candidate, ec);
    // The parser refuses such an entry as written; a link (a `~/` entry) may still lead to
    // one, and its cover would make the spawn fail: the same rule, on the resolved path.
    if (ec || canonical == "/" || policy::UncoverableHideReason(canonical.string())) continue;
    if (::stat(canonical.c_str(), &st) != 0) continue;
    HiddenPath entry{canonical, S_ISDIR(st.st_mode)};
    if (std::find(hidden.begin(), hidden.end(), entry) == hidden.end()) hidden.push_back(entry);
  }
  return hidden;
}

bool ReachableByStranger(const fs::path& path, const std::vector<fs::path>& roots) {
  auto inside_a_root = [&](const fs::path& dir) {
    return std::any_of(roots.begin(), roots.end(), [&](const fs::path& root) {
      const std::string r = root.string();
      const std::string d = dir.string();
      return d == r || d.starts_with(r.back() == '/' ? r : r + "/");
    });
  };
  // Inside a root, whatever the directories above the root allow: the launcher makes every
  // root reachable (binds, and veils over unsearchable parents), so a path there needs its
  // cover even below a 0700 directory (a root of a mkdtemp or /root directory).
  if (inside_a_root(path.parent_path())) return true;
  fs::path dir = "/";
  for (const fs::path& part : path.parent_path().relative_path()) {
    dir /= part;
    // Inside a root the owner is the session itself (idmapped): the owner's bits apply there,
    // and the session reaches what its roots hold.
    if (inside_a_root(dir)) return true;
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
  }
  return true;
}

std::vector<fs::path> OwnHomeDirectories() {
  std::vector<fs::path> homes;
  if (::geteuid() == 0) return homes;
  auto add = [&](const char* dir) { AddHomeDirectory(homes, dir); };
  add(std::getenv("HOME"));
  // getpwuid_r: no process-wide state, unlike the getpwent walk above.
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    add(found->pw_dir);
  }
  return homes;
}

HomeCover CoverOfHome(const fs::path& home, const std::vector<fs::path>& granted) {
  auto within = [](const fs::path& path, const fs::path& dir) {
    const fs::path rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
  };
  bool holds = false;
  for (const fs::path& g : granted) {
    if (g.empty()) continue;
    if (within(home, g)) return HomeCover::kGranted;  // HOME in the workspace: granted whole
    holds = holds || within(g, home);
  }
  return holds ? HomeCover::kVeil : HomeCover::kHide;
}

namespace {

// At most this many sockets are covered; a host with more keeps the rest reachable (system
// services' sockets come first, so a local user binding thousands pushes out only users'), and
// the daemon says so once.
constexpr size_t kMaxCoveredSockets = 256;
// The kernel's table is read up to this size (about 150,000 sockets), every pathname socket in
// it looked at: one lstat each in a directory a session reaches, nothing more elsewhere.
constexpr size_t kUnixTableMax = 16 * 1024 * 1024;
constexpr size_t kUnixPathsMax = 1u << 20;
// Entries read from a directory whose bound socket was renamed, at most.
constexpr size_t kRenamedScanMax = 4096;
// Accounts below this uid are the system's (login.defs' UID_MIN).
constexpr uid_t kFirstUserUid = 1000;

std::string ReadUnixTable() {
  std::string table;
  std::ifstream file("/proc/net/unix", std::ios::binary);
  char chunk[64 * 1024];
  while (file && table.size() < kUnixTableMax) {
    file.read(chunk, sizeof chunk);
    table.append(chunk, static_cast<size_t>(std::max<std::streamsize>(file.gcount(), 0)));
  }
  return table;
}

// Could the session's host id connect to this socket? Connecting needs write permission on
// the inode. A root daemon's session id owns no host file and is in no group: only "other"
// counts. An ordinary user's sessions run as that user (its own sockets and groups count).
bool SessionMayConnect(const fs::path& path, const struct stat& st) {
  if (::geteuid() == 0) return (st.st_mode & S_IWOTH) != 0;
  return ::access(path.c_str(), W_OK) == 0;
}

// Every socket a host service has bound (/proc/net/unix of the daemon's network namespace,
// which is the host's or the container's) that a confined session would see through the
// read-only host root and could connect to: outside the run-time directories and /tmp (empty
// in the session), outside the roots (the granted area, where sessions' own sockets live), not
// hidden already. Each is covered with /dev/null at the launch, by descriptor in the launcher's
// mount namespace (mount_stage.h, StagePlan::host_sockets), so `connect` finds no socket there
// (ECONNREFUSED); Landlock's pathname-socket control, where the kernel has it, also refuses
// sockets bound after the launch (sandbox/init/landlock.cc).
void AddHostSockets(SandboxSpec& spec) {
  spec.host_sockets.clear();
  const std::string table = ReadUnixTable();
  std::vector<fs::path> outside = spec.run_dirs;
  outside.emplace_back("/tmp");
  outside.push_back(spec.workspace_root);
  outside.insert(outside.end(), spec.writable_roots.begin(), spec.writable_roots.end());
  for (const HiddenPath& hidden : spec.hidden) {
    if (hidden.directory) outside.push_back(hidden.path);
  }
  auto under = [](const fs::path& path, const fs::path& dir) {
    if (dir.empty()) return false;
    const fs::path rel = path.lexically_relative(dir.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
  };
  std::vector<fs::path> system;  // owned by a system account: covered first
  std::vector<fs::path> users;
  std::set<fs::path> seen;
  // Sockets gather in a few directories: each directory is resolved and judged once (outside
  // the run-time directories, /tmp, the roots and hidden directories; searchable by the
  // session's id), so sockets in a directory no session reaches cost nothing more, and
  // thousands bound there cannot push a service's socket out of the look (outside review 12:
  // 24,000 in a 0700 directory filled a limit counted before any filter).
  std::map<fs::path, std::optional<fs::path>> directories;
  std::set<fs::path> renamed_in;
  const bool as_root = ::geteuid() == 0;
  auto consider = [&](const fs::path& path, const struct stat& st) {
    if (!S_ISSOCK(st.st_mode) || !SessionMayConnect(path, st)) return;
    if (policy::UncoverableHideReason(path.string())) return;
    if (std::find(spec.hidden.begin(), spec.hidden.end(), HiddenPath{path, false}) !=
        spec.hidden.end()) {
      return;
    }
    if (!seen.insert(path).second) return;
    (st.st_uid < kFirstUserUid ? system : users).push_back(path);
  };
  for (const fs::path& bound : UnixSocketPaths(table, kUnixPathsMax)) {
    auto [parent, added] = directories.try_emplace(bound.parent_path());
    if (added) {
      std::error_code ec;
      fs::path canonical = fs::canonical(bound.parent_path(), ec);
      const bool reachable =
          !ec &&
          !std::any_of(outside.begin(), outside.end(),
                       [&](const fs::path& dir) {
                         return canonical == dir.lexically_normal() || under(canonical, dir);
                       }) &&
          (as_root ? ReachableByStranger(canonical / bound.filename(), {})
                   : ::access(canonical.c_str(), X_OK) == 0);
      if (reachable) parent->second = std::move(canonical);
    }
    if (!parent->second || bound.filename().empty()) continue;
    const fs::path path = *parent->second / bound.filename();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      // The name it was bound under is gone: a service that binds a temporary name and renames
      // it into place (outside review 12). Its directory's sockets are looked at below.
      if (errno == ENOENT) renamed_in.insert(*parent->second);
      continue;
    }
    consider(path, st);
  }
  // Each directory that lost a bound name: the sockets in it now, at most kRenamedScanMax
  // entries per directory.
  for (const fs::path& dir : renamed_in) {
    DIR* stream = ::opendir(dir.c_str());
    if (stream == nullptr) continue;
    size_t entries = 0;
    while (struct dirent* e = ::readdir(stream)) {
      if (++entries > kRenamedScanMax) break;
      if (e->d_type != DT_SOCK && e->d_type != DT_UNKNOWN) continue;
      const fs::path path = dir / e->d_name;
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0) consider(path, st);
    }
    ::closedir(stream);
  }
  spec.host_sockets = std::move(system);
  spec.host_sockets.insert(spec.host_sockets.end(), users.begin(), users.end());
  if (spec.host_sockets.size() > kMaxCoveredSockets) {
    spec.host_sockets.resize(kMaxCoveredSockets);
    static std::once_flag said;
    std::call_once(said, [] {
      LogWarn("more than " + std::to_string(kMaxCoveredSockets) +
              " UNIX sockets a session could connect to are bound on this host outside /run and "
              "/tmp: sessions see the rest (docs/security.md, \"No host service over UNIX "
              "sockets\")");
    });
  }
}

}  // namespace

void ApplyHostWalls(const policy::ResolvedPolicy& policy, SandboxSpec& spec) {
  spec.run_dirs = HostRunDirs();
  spec.hidden = policy.hidden.empty() ? std::vector<HiddenPath>{}
                                      : CollectHiddenPaths(policy.hidden, HomeDirectories());
  // Every daemon of this user keeps its socket and records there: hidden in every session of
  // any of them, also where it is not under /run (hidden whole already).
  if (std::optional<fs::path> own = PerUserRuntimeDirectory()) {
    std::error_code ec;
    const fs::path dir = fs::canonical(*own, ec);
    const bool under_run = std::any_of(
        spec.run_dirs.begin(), spec.run_dirs.end(),
        [&](const fs::path& run) { return dir.string().starts_with(run.string() + "/"); });
    HiddenPath entry{dir, true};
    if (!ec && fs::is_directory(dir, ec) && !under_run &&
        std::find(spec.hidden.begin(), spec.hidden.end(), entry) == spec.hidden.end()) {
      spec.hidden.push_back(entry);
    }
  }
  if (!policy::IsConfined(policy.mode)) return;
  AddHostSockets(spec);
  // `hide: []` from the operator turns every cover of a secret off, this one too.
  if (policy.hidden.empty()) return;
  std::vector<fs::path> granted = spec.writable_roots;
  granted.push_back(spec.workspace_root);
  granted.push_back(spec.cwd);
  spec.veiled_homes.clear();
  for (const fs::path& home : OwnHomeDirectories()) {
    // A home that is, or holds, what every session needs (a HOME of /usr) is never covered.
    if (policy::UncoverableHideReason(home.string())) continue;
    switch (CoverOfHome(home, granted)) {
      case HomeCover::kGranted:
        break;
      case HomeCover::kVeil:
        if (std::find(spec.veiled_homes.begin(), spec.veiled_homes.end(), home) ==
            spec.veiled_homes.end()) {
          spec.veiled_homes.push_back(home);
        }
        break;
      case HomeCover::kHide:
        if (HiddenPath entry{home, true};
            std::find(spec.hidden.begin(), spec.hidden.end(), entry) == spec.hidden.end()) {
          spec.hidden.push_back(std::move(entry));
        }
        break;
    }
  }
}

std::vector<fs::path> UnixSocketPaths(std::string_view table, size_t limit) {
  std::vector<fs::path> paths;
  std::set<std::string_view> seen;
  size_t from = 0;
  bool header = true;
  while (from < table.size() && paths.size() < limit) {
    size_t end = table.find('\n', from);
    if (end == std::string_view::npos) end = table.size();
    std::string_view line = table.substr(from, end - from);
    from = end + 1;
    // The first line is the header: "Num RefCount Protocol Flags Type St Inode Path".
    if (std::exchange(header, false)) continue;
    // Seven fields, then one space and the path (which may hold spaces), or nothing.
    size_t at = 0;
    for (int field = 0; field < 7 && at != std::string_view::npos; ++field) {
      at = line.find_first_not_of(' ', at);
      if (at != std::string_view::npos) at = line.find(' ', at);
    }
    if (at == std::string_view::npos || at + 1 >= line.size()) continue;
    const std::string_view path = line.substr(at + 1);
    if (path.front() != '/') continue;  // abstract ("@name") or relative: no host file
    if (seen.insert(path).second) paths.emplace_back(path);
  }
  return paths;
}

void DropCoversOutOfReach(SandboxSpec& spec) {
  std::vector<fs::path> roots = spec.writable_roots;
  roots.push_back(spec.workspace_root);
  std::erase_if(spec.hidden,
                [&](const HiddenPath& h) { return !ReachableByStranger(h.path, roots); });
  if (!spec.daemon_socket.empty() && !ReachableByStranger(spec.daemon_socket, roots)) {
    spec.daemon_socket.clear();
  }
}

}  // namespace ptybox::sandbox
