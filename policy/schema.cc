// Tables of keys and limit bounds, environment-name rules and key suggestions.
#include "policy/schema.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace ptybox::policy {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;
constexpr int64_t kTiB = 1024 * kGiB;

constexpr LimitSpec Plain(std::string_view key, std::string_view unit, int64_t min, int64_t max,
                          LimitRule rule, int64_t Limits::*member) {
  return LimitSpec{key, unit, min, max, rule, member, nullptr, 0};
}
constexpr LimitSpec Floored(std::string_view key, std::string_view unit, int64_t min, int64_t max,
                            int64_t repository_min, int64_t Limits::*member) {
  return LimitSpec{key, unit, min, max, LimitRule::kFree, member, nullptr, repository_min};
}
constexpr LimitSpec Optional(std::string_view key, std::string_view unit, int64_t min, int64_t max,
                             std::optional<int64_t> Limits::*member) {
  return LimitSpec{key, unit, min, max, LimitRule::kLowerOnly, nullptr, member, 0};
}

// Bounds: zero only where it means "no wait"; maxima well past any real use, low enough that a
// value is never a typo for "infinite" and never overflows arithmetic on milliseconds or bytes.
const std::array<LimitSpec, 21> kLimitSpecs = {
    Plain("idleSilenceMs", "milliseconds", 1, 3'600'000, LimitRule::kFree,
          &Limits::idle_silence_ms),
    Plain("handoffGraceMs", "milliseconds", 0, 60'000, LimitRule::kFree, &Limits::handoff_grace_ms),
    Plain("timeoutMs", "milliseconds", 1, 86'400'000, LimitRule::kFree, &Limits::timeout_ms),
    Plain("startupTimeoutMs", "milliseconds", 1, 3'600'000, LimitRule::kFree,
          &Limits::startup_timeout_ms),
    // Every busy session's poll is a timer on the daemon's one reactor thread: at 1 ms one
    // repository file slowed other owners 72x. 10 ms keeps a session's polling to 100 wake-ups
    // a second (readiness is judged over hundreds of milliseconds, so nothing is lost); an
    // operator, who owns the whole daemon, may still go lower.
    Floored("pollIntervalMs", "milliseconds", 1, 10'000, kRepositoryMinPollIntervalMs,
            &Limits::poll_interval_ms),
    Plain("exactProbeAfterMs", "milliseconds", 0, 60'000, LimitRule::kFree,
          &Limits::exact_probe_after_ms),
    Plain("scrollbackLines", "lines", 1, 10'000'000, LimitRule::kLowerOnly,
          &Limits::scrollback_lines),
    Plain("scrollbackBytes", "bytes", 4 * kKiB, kGiB, LimitRule::kLowerOnly,
          &Limits::scrollback_bytes),
    Plain("maxReadBytes", "bytes", kKiB, 64 * kMiB, LimitRule::kLowerOnly, &Limits::max_read_bytes),
    Plain("maxResultBytes", "bytes", kKiB, 64 * kMiB, LimitRule::kLowerOnly,
          &Limits::max_result_bytes),
    Plain("disposeGraceMs", "milliseconds", 0, 600'000, LimitRule::kLowerOnly,
          &Limits::dispose_grace_ms),
    Plain("maxSessions", "sessions", 1, 1024, LimitRule::kLowerOnly, &Limits::max_sessions),
    // Operator only: how long every owner's sessions outlive its connection. A repository file
    // is shared by every owner of the workspace, and `0` there closed other owners' detached
    // sessions at once.
    Plain("detachGraceMs", "milliseconds", 0, 86'400'000, LimitRule::kOperatorOnly,
          &Limits::detach_grace_ms),
    Optional("maxProcesses", "processes", 1, 4'194'304, &Limits::max_processes),
    Optional("maxOpenFiles", "files", 16, 1'048'576, &Limits::max_open_files),
    Optional("maxMemoryBytes", "bytes", 16 * kMiB, 128 * kTiB, &Limits::max_memory_bytes),
    Optional("maxFileBytes", "bytes", 1, 1024 * kTiB, &Limits::max_file_bytes),
    Optional("maxCpuSeconds", "seconds", 1, 31'536'000, &Limits::max_cpu_seconds),
    Plain("maxTasks", "tasks", 1, 4'194'304, LimitRule::kLowerOnly, &Limits::max_tasks),
    Optional("maxCpuMillicores", "thousandths of a core", 10, 1'024'000,
             &Limits::max_cpu_millicores),
    // Operator only in effect: a repository file may only lower it (0 disables the pool).
    Plain("warmShells", "shells per launch key", 0, 4, LimitRule::kLowerOnly, &Limits::warm_shells),
};

// Every top-level key with its one rule: only the operator's file may set it (a repository
// file cannot widen or move the sandbox).
struct TopLevelKey {
  std::string_view name;
  bool operator_only;
};
constexpr std::array<TopLevelKey, 12> kTopLevel = {{
    {"version", false},
    {"mode", false},
    {"ceiling", true},
    {"workspace", true},
    {"writable", false},
    {"network", false},
    {"env", false},
    {"limits", false},
    {"hide", false},
    {"repository", true},
    {"sessionIds", true},
    {"audit", true},
}};
constexpr std::array<std::string_view, kTopLevel.size()> kTopLevelKeys = [] {
  std::array<std::string_view, kTopLevel.size()> names{};
  for (size_t i = 0; i < kTopLevel.size(); ++i) names[i] = kTopLevel[i].name;
  return names;
}();
constexpr std::array<std::string_view, 3> kAuditKeys = {"log", "recordDir", "recordMaxBytes"};
// Common credentials, hidden from confined sessions unless the operator's `hide` replaces the
// list. `~/` stands for every home directory (sandbox/host_walls.h).
constexpr std::array<std::string_view, 79> kDefaultHidden = {
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.npmrc",
    "~/.yarnrc.yml",
    "~/.pypirc",
    "~/.config/pip/pip.conf",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.config/gh",
    "~/.config/hub",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.vault-token",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.local/state/ptybox",
    // Agents, databases, package registries and cloud tools that keep a token or password in a
    // file of their own (a session has a private HOME: none of its tools needs the host's).
    "~/.claude/.credentials.json",
    "~/.claude.json",
    "~/.codex/auth.json",
    "~/.gemini/oauth_creds.json",
    "~/.config/github-copilot",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.huggingface/token",
    "~/.cache/huggingface/token",
    "~/.m2/settings.xml",
    "~/.m2/settings-security.xml",
    "~/.gradle/gradle.properties",
    "~/.yarnrc",
    "~/.config/rclone/rclone.conf",
    "~/.s3cfg",
    "~/.boto",
    "~/.oci",
    "~/.config/doctl",
    "~/.databrickscfg",
    "~/.pulumi/credentials.json",
    "~/.config/composer/auth.json",
    "~/.composer/auth.json",
    "~/.nuget/NuGet/NuGet.Config",
    "~/.ivy2/.credentials",
    "~/.sbt/.credentials",
    "~/.config/glab-cli",
    "~/.config/op",
    "~/.ansible/vault_pass",
    // Files that hold a token next to ordinary settings (an outside review read each from a
    // root daemon's session, other users' homes being 0755 here).
    "~/.pip/pip.conf",
    "/etc/pip.conf",
    "~/.gitconfig",
    "~/.config/git/config",
    "~/.config/helm/repositories.yaml",
    "~/.bundle/config",
    "~/.condarc",
    "~/.config/configstore",
    "~/.config/openstack/clouds.yaml",
    "~/.local/share/fish/fish_history",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.lesshst",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ptybox",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
};
constexpr std::array<std::string_view, 2> kRepositoryKeys = {"envSet", "trustInDangerFullAccess"};
constexpr std::array<std::string_view, 2> kEnvKeys = {"pass", "set"};
constexpr std::array<std::string_view, 9> kDefaultEnvPass = {
    "PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME",
};

// Names the shell backend owns. TERM only when given a value: a session's terminal type is the
// one ptybox decodes, `ptybox run`'s the caller's (passed by name, see docs/policy.md).
constexpr std::array<std::string_view, 10> kReservedPassNames = {
    "PROMPT_COMMAND", "PS0", "PS1",       "PS2",      "PS4",
    "BASH_ENV",       "ENV", "SHELLOPTS", "BASHOPTS", "BASH_XTRACEFD",
};
const std::array<std::string_view, kReservedPassNames.size() + 1> kReservedSetNames = [] {
  std::array<std::string_view, kReservedPassNames.size() + 1> names{};
  std::copy(kReservedPassNames.begin(), kReservedPassNames.end(), names.begin());
  names.back() = "TERM";
  return names;
}();

// A repository file's env.set, by default: output style and build parallelism only.
constexpr std::array<std::string_view, 16> kDefaultRepositoryEnvSet = {
    "CI",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CMAKE_BUILD_PARALLEL_LEVEL",
    "CTEST_OUTPUT_ON_FAILURE",
    "CTEST_PARALLEL_LEVEL",
    "DEBIAN_FRONTEND",
    "FORCE_COLOR",
    "NODE_ENV",
    "NO_COLOR",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "PYTHONUNBUFFERED",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "SOURCE_DATE_EPOCH",
};

// Names that make a program load or run code, or read its startup/config from elsewhere.
constexpr std::string_view kCodeLoadingNames[] = {
    // bash: startup files, hooks, options, parsing, timeouts, mail messages (expanded)
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "BASH_XTRACEFD",
    "TMOUT",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "EXECIGNORE",
    "HISTFILE",
    "INPUTRC",
    "MAIL",
    "MAILPATH",
    "MAILCHECK",
    "SHELL",
    "HOME",
    "PATH",
    "TERM",
    "TERMINFO",
    "TERMINFO_DIRS",
    // the dynamic loader and libc
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "TZ",
    "TZDIR",
    // interpreters
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
    "PYTHONWARNINGS",
    "PYTHONEXECUTABLE",
    "PYTHONSAFEPATH",
    "PERL5LIB",
    "PERLLIB",
    "PERL5OPT",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "TCLLIBPATH",
    "R_PROFILE",
    "R_PROFILE_USER",
    "R_ENVIRON",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    // tools that run a command or a compiler named by a variable
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "SSH_AUTH_SOCK",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKEFILES",
    "GOFLAGS",
    "GOTOOLCHAIN",
    "GOPROXY",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "CURL_HOME",
    "WGETRC",
    "PIP_CONFIG_FILE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
};
constexpr std::string_view kCodeLoadingPrefixes[] = {
    "LD_",  "DYLD_", "MALLOC_", "BASH_FUNC_",  "GIT_",        "XDG_",    "CARGO_",
    "LUA_", "LC_",   "PTYBOX_", "NPM_CONFIG_", "npm_config_", "DOCKER_", "SSH_",
};

std::string Normalize(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '_' || c == '-') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

}  // namespace

std::string_view ToString(PolicyRole role) {
  return role == PolicyRole::kOperator ? "operator" : "repository";
}

std::optional<int64_t> LimitSpec::Get(const Limits& limits) const {
  if (value != nullptr) return limits.*value;
  return limits.*optional_value;
}

void LimitSpec::Set(Limits& limits, int64_t v) const {
  if (value != nullptr) {
    limits.*value = v;
  } else {
    limits.*optional_value = v;
  }
}

std::span<const LimitSpec> LimitSpecs() { return kLimitSpecs; }

const LimitSpec* FindLimit(std::string_view key) {
  for (const LimitSpec& spec : kLimitSpecs) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::span<const std::string_view> TopLevelKeys() { return kTopLevelKeys; }

bool IsOperatorOnlyKey(std::string_view key) {
  for (const TopLevelKey& top : kTopLevel) {
    if (top.name == key) return top.operator_only;
  }
  return false;
}

std::span<const std::string_view> AuditKeys() { return kAuditKeys; }

std::span<const std::string_view> EnvKeys() { return kEnvKeys; }

std::span<const std::string_view> DefaultEnvPass() { return kDefaultEnvPass; }
std::span<const std::string_view> DefaultHidden() { return kDefaultHidden; }

std::string EnvNamePattern() {
  return "^[A-Za-z_][A-Za-z0-9_]{0," + std::to_string(kMaxEnvNameBytes - 1) + "}$";
}

std::span<const std::string_view> ReservedEnvNames(EnvUse use) {
  if (use == EnvUse::kPass) return kReservedPassNames;
  return kReservedSetNames;
}

std::optional<std::string> ReservedEnvReason(std::string_view name, EnvUse use) {
  if (name == "PROMPT_COMMAND" || name == "PS0" || name == "PS1" || name == "PS2" ||
      name == "PS4") {
    return "the shell backend sets the prompt variables itself to detect when a command is done";
  }
  if (name == "BASH_ENV" || name == "ENV") {
    return "it names a file bash runs at startup, which the shell backend controls";
  }
  if (name == "SHELLOPTS" || name == "BASHOPTS") {
    return "it turns on shell options (like xtrace) at startup, which the shell backend controls";
  }
  if (name == "BASH_XTRACEFD") {
    return "it redirects the shell's trace output, which the shell backend keeps away from its "
           "prompt";
  }
  if (name == "TERM" && use == EnvUse::kSet) {
    return "the terminal type is the terminal's: a session gets xterm-256color (what ptybox "
           "decodes), `ptybox run` the caller's TERM when the policy passes TERM, else dumb";
  }
  if (name.starts_with(kReservedEnvPrefix))
    return "the PTYBOX_ prefix is reserved for ptybox itself";
  return std::nullopt;
}

std::optional<std::string> EnvNameProblem(std::string_view name, EnvUse use) {
  if (!IsValidEnvName(name)) {
    return "`" + Printable(name) +
           "` is not a valid variable name; use letters, digits and `_`, not starting with a "
           "digit (at most " +
           std::to_string(kMaxEnvNameBytes) + " characters)";
  }
  if (auto reason = ReservedEnvReason(name, use)) {
    return "`" + std::string(name) + "` is reserved: " + *reason;
  }
  return std::nullopt;
}

std::optional<std::string> EnvValueProblem(std::string_view value) {
  if (size_t nul = value.find('\0'); nul != std::string_view::npos) {
    return "the value contains a NUL character at byte " + std::to_string(nul) +
           "; a variable's value cannot hold NUL (it would end the value and start another "
           "variable)";
  }
  if (value.size() > kMaxEnvValueBytes) {
    return "the value has " + std::to_string(value.size()) + " bytes; at most " +
           std::to_string(kMaxEnvValueBytes) + " are allowed";
  }
  return std::nullopt;
}

std::span<const std::string_view> DefaultRepositoryEnvSet() { return kDefaultRepositoryEnvSet; }

std::optional<std::string> CodeLoadingEnvReason(std::string_view name) {
  bool listed = std::find(std::begin(kCodeLoadingNames), std::end(kCodeLoadingNames), name) !=
                std::end(kCodeLoadingNames);
  for (std::string_view prefix : kCodeLoadingPrefixes) listed = listed || name.starts_with(prefix);
  if (!listed) return std::nullopt;
  return "`" + std::string(name) +
         "` can make a program load or run code, or read its startup or configuration files "
         "from elsewhere; a repository file can be written by anything that runs in the "
         "workspace, so it may never set it";
}

std::span<const std::string_view> RepositoryKeys() { return kRepositoryKeys; }

std::optional<std::string> NormalHomeHide(std::string_view text) {
  if (!text.starts_with("~/") || text.find('\0') != std::string_view::npos ||
      text.size() > kMaxPathBytes) {
    return std::nullopt;
  }
  const std::filesystem::path normal = std::filesystem::path(text.substr(2)).lexically_normal();
  if (normal.empty() || normal.is_absolute() || *normal.begin() == ".." || normal == ".") {
    return std::nullopt;
  }
  return "~/" + normal.string();
}

std::optional<std::string> UncoverableHideReason(std::string_view path) {
  // The directories, and the shells a session runs (a file cover on one makes exec fail).
  static constexpr std::string_view kNeeded[] = {
      "/usr",    "/bin",     "/sbin",   "/lib",      "/lib32",      "/lib64",
      "/libx32", "/etc",     "/dev",    "/proc",     "/sys",        "/tmp",
      "/run",    "/var/run", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash",
  };
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::string_view dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  for (std::string_view needed : kNeeded) {
    // `dir` is `needed` or one of the directories above it.
    const bool holds =
        dir == "/" || needed == dir || (needed.starts_with(dir) && needed[dir.size()] == '/');
    if (!holds) continue;
    return "`" + Printable(path, 256) + "` " +
           (needed == dir ? std::string("is ") : "holds " + std::string(needed) + ", ") +
           "a path every session needs to start; covering it would make every spawn fail. "
           "Hide the secret files beside it or inside it instead";
  }
  return std::nullopt;
}

int EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string_view> SuggestKey(std::string_view typo,
                                           std::span<const std::string_view> known) {
  if (typo.size() > 64) return std::nullopt;
  const std::string wanted = Normalize(typo);
  std::optional<std::string_view> best;
  int best_distance = 0;
  for (std::string_view candidate : known) {
    const std::string normal = Normalize(candidate);
    int distance = EditDistance(wanted, normal);
    const size_t length = std::max(wanted.size(), normal.size());
    const int allowed = length <= 4 ? 1 : length <= 8 ? 2 : 3;
    if (distance > allowed) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace ptybox::policy
