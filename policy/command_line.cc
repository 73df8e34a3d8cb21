// The policy flags as table rows, each turning one value into the layer's PolicyFile fields with
// the checks a policy file's value gets (schema.h's rules), located at "command line --FLAG".
#include "policy/command_line.h"

#include <algorithm>
#include <array>
#include <system_error>

#include "policy/host_pattern.h"
#include "policy/network_names.h"
#include "policy/schema.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;

// "command line --writable ../cache": where a value was given, for messages.
std::string WhereOf(const CommandLineValue& given) {
  return std::string(kCommandLineSource) + " " + given.flag + " " + Printable(given.value, 256);
}

void AddError(ParsedPolicyFile& layer, const std::string& where, std::string_view key,
              const std::string& message) {
  layer.errors.push_back(
      Error{ErrorKind::kPolicyError, where + ": " + std::string(key) + ": " + message, where});
}

// A path value: non-empty, bounded; a relative one resolves against the workspace root (the
// command line has no file whose directory could anchor it). Absolute and lexically normal.
std::optional<fs::path> PathValue(const CommandLineValue& given, const CommandLineContext& context,
                                  ParsedPolicyFile& layer, std::string_view key) {
  if (given.value.empty() || given.value.find('\0') != std::string::npos ||
      given.value.size() > kMaxPathBytes) {
    AddError(layer, WhereOf(given), key,
             "expected a path of 1 to " + std::to_string(kMaxPathBytes) +
                 " bytes; give a directory (a relative path starts at the workspace root)");
    return std::nullopt;
  }
  fs::path path(given.value);
  if (path.is_relative()) path = context.workspace_root / path;
  return path.lexically_normal();
}

// `where` names the flag (and its value, unless it may be a secret).
bool WithinListBound(size_t count, const std::string& where, const CommandLineValue& given,
                     ParsedPolicyFile& layer, std::string_view key) {
  if (count < kMaxListEntries) return true;
  AddError(layer, where, key,
           "more than " + std::to_string(kMaxListEntries) + " " + given.flag + " flags; at most " +
               std::to_string(kMaxListEntries) + " are allowed (list them in a policy file's `" +
               std::string(key) + "` instead)");
  return false;
}

// --network and --allow-host both say what the network is; given together, one would
// silently undo the other.
bool NetworkNotCombined(const CommandLineValue& given, const std::string& where,
                        ParsedPolicyFile& layer) {
  const bool network = given.flag == "--network";
  const std::string* other = nullptr;
  if (network && layer.file.network_names) other = &layer.file.network_names->where;
  if (!network && layer.file.network_allowed) other = &layer.file.network_allowed->where;
  if (other == nullptr) return true;
  AddError(layer, where, "network",
           "--network and --allow-host cannot be combined (first: `" + *other +
               "`): --allow-host already limits the network to the names given; give one of "
               "them");
  return false;
}

void ApplyNetwork(const CommandLineValue& given, const CommandLineContext& /*context*/,
                  ParsedPolicyFile& layer) {
  const std::string where = WhereOf(given);
  if (!NetworkNotCombined(given, where, layer)) return;
  if (layer.file.network_allowed) {
    AddError(layer, where, "network",
             "--network is given more than once (first as `" + layer.file.network_allowed->where +
                 "`); give it once");
    return;
  }
  if (given.value == NetworkName(false) || given.value == NetworkName(true)) {
    layer.file.network_allowed = Located<bool>{given.value == NetworkName(true), where};
    return;
  }
  std::string message = "expected `deny` or `allow`, got `" + Printable(given.value) + "`";
  if (auto suggestion = SuggestKey(given.value, kNetworkNames)) {
    message += "; did you mean `" + std::string(*suggestion) + "`?";
  } else {
    message += "; write --network allow or --network deny";
  }
  AddError(layer, where, "network", message);
}

void ApplyWritable(const CommandLineValue& given, const CommandLineContext& context,
                   ParsedPolicyFile& layer) {
  if (!WithinListBound(layer.file.writable.size(), WhereOf(given), given, layer, "writable")) {
    return;
  }
  std::optional<fs::path> lexical = PathValue(given, context, layer, "writable");
  if (!lexical) return;
  layer.file.writable_where = std::string(kCommandLineSource);
  auto canonical = context.directories(*lexical);
  if (!canonical) {
    AddError(layer, WhereOf(given), "writable",
             canonical.error() + "; create the directory or drop the flag");
    return;
  }
  const bool seen = std::any_of(layer.file.writable.begin(), layer.file.writable.end(),
                                [&](const auto& root) { return root.value == *canonical; });
  if (!seen) layer.file.writable.push_back(Located<fs::path>{*canonical, WhereOf(given)});
}

void ApplyHide(const CommandLineValue& given, const CommandLineContext& context,
               ParsedPolicyFile& layer) {
  if (!WithinListBound(layer.file.hide.size(), WhereOf(given), given, layer, "hide")) return;
  layer.file.hide_where = std::string(kCommandLineSource);
  std::string value;
  if (given.value.starts_with("~")) {
    std::optional<std::string> home = NormalHomeHide(given.value);
    if (!home) {
      AddError(layer, WhereOf(given), "hide",
               "`~` must be followed by `/` and a path inside the home directory, like `~/.ssh` "
               "(it stands for every home directory)");
      return;
    }
    value = std::move(*home);
  } else {
    std::optional<fs::path> lexical = PathValue(given, context, layer, "hide");
    if (!lexical) return;
    value = lexical->string();
    if (auto reason = UncoverableHideReason(value)) {
      AddError(layer, WhereOf(given), "hide", *reason);
      return;
    }
  }
  if (std::none_of(layer.file.hide.begin(), layer.file.hide.end(),
                   [&](const auto& path) { return path.value == value; })) {
    layer.file.hide.push_back(Located<std::string>{value, WhereOf(given)});
  }
}

// --env NAME passes NAME from ptybox's own environment; --env NAME=VALUE sets it. The value is
// never part of a message (it may be a secret), nor is a name that is not one (it may be a
// secret given without its name).
void ApplyEnv(const CommandLineValue& given, const CommandLineContext& /*context*/,
              ParsedPolicyFile& layer) {
  const size_t equals = given.value.find('=');
  const std::string name = given.value.substr(0, equals);
  const EnvUse use = equals == std::string::npos ? EnvUse::kPass : EnvUse::kSet;
  const std::string key = use == EnvUse::kPass ? "env.pass" : "env.set";
  if (!IsValidEnvName(name)) {
    AddError(layer, std::string(kCommandLineSource) + " --env", key,
             "the name before `=` is not a valid variable name (it is not shown, in case it is a "
             "value); use letters, digits and `_`, not starting with a digit (at most " +
                 std::to_string(kMaxEnvNameBytes) +
                 " characters): --env NAME passes NAME from ptybox's environment, --env "
                 "NAME=VALUE sets it");
    return;
  }
  const std::string where = std::string(kCommandLineSource) + " --env " + name;
  if (auto problem = EnvNameProblem(name, use)) {
    AddError(layer, where, key, *problem + "; drop --env " + name);
    return;
  }
  const size_t count = layer.file.env_pass.size() + layer.file.env_set.size();
  if (!WithinListBound(count, where, given, layer, "env")) return;
  layer.file.env_where = std::string(kCommandLineSource);
  const bool passed = std::any_of(layer.file.env_pass.begin(), layer.file.env_pass.end(),
                                  [&](const auto& entry) { return entry.value == name; });
  if (passed || layer.file.env_set.contains(name)) {
    AddError(layer, where, key,
             "`" + name + "` is given more than once; give --env " + name + " once");
    return;
  }
  if (use == EnvUse::kPass) {
    layer.file.env_pass_where = std::string(kCommandLineSource);
    layer.file.env_pass.push_back(Located<std::string>{name, where});
    return;
  }
  const std::string value = given.value.substr(equals + 1);
  if (auto problem = EnvValueProblem(value)) {
    AddError(layer, where, key, *problem);
    return;
  }
  layer.file.env_set_where = std::string(kCommandLineSource);
  layer.file.env_set[name] = Located<std::string>{value, where};
}

void ApplyAllowHost(const CommandLineValue& given, const CommandLineContext& /*context*/,
                    ParsedPolicyFile& layer) {
  const std::string where = WhereOf(given);
  if (!NetworkNotCombined(given, where, layer)) return;
  std::expected<HostPattern, std::string> pattern = ParseHostPattern(given.value);
  if (!pattern) {
    AddError(layer, where, "network.allow",
             pattern.error() +
                 "; write a host name such as registry.npmjs.org, *.example.org or "
                 "git.example.org:8443");
    return;
  }
  if (!layer.file.network_names) {
    PolicyFile::NetworkLists lists;
    lists.allow.emplace();
    layer.file.network_names = Located<PolicyFile::NetworkLists>{std::move(lists), where};
  }
  std::vector<NetworkRule>& allow = *layer.file.network_names->value.allow;
  if (!WithinListBound(allow.size(), where, given, layer, "network.allow")) return;
  allow.push_back(NetworkRule{*pattern, where});
}

// One row per flag.
constexpr std::array kFlags = {
    CommandLineFlag{"--network", "allow|deny",
                    "the network inside confined sessions, within what the operator policy allows "
                    "(--network allow is refused where it denies the network)",
                    false, ApplyNetwork},
    CommandLineFlag{"--allow-host", "PATTERN",
                    "confined sessions reach only the names given (repeatable), through ptybox's "
                    "proxy: registry.npmjs.org, *.example.org, host:8443; within the operator "
                    "policy's network (its list, or where it allows the network)",
                    true, ApplyAllowHost},
    CommandLineFlag{"--writable", "DIR",
                    "also writable in workspace-write (repeatable); relative to the workspace; "
                    "within the workspace or the operator's writable roots unless its ceiling is "
                    "danger-full-access",
                    true, ApplyWritable},
    CommandLineFlag{"--env", "NAME[=VALUE]",
                    "pass NAME from this environment, or set it to VALUE, in every session "
                    "(repeatable); never a name the operator policy sets or the shell owns",
                    true, ApplyEnv},
    CommandLineFlag{"--hide", "PATH",
                    "also hide PATH from confined sessions (repeatable); relative to the "
                    "workspace, ~/ for every home directory",
                    true, ApplyHide},
};

}  // namespace

DirectoryLookup HostDirectories() {
  return [](const fs::path& path) -> std::expected<fs::path, std::string> {
    std::error_code ec;
    fs::path canonical = fs::canonical(path, ec);
    if (ec) {
      const std::string shown = Printable(path.string(), 256);
      if (ec == std::errc::no_such_file_or_directory)
        return std::unexpected(shown + " does not exist");
      return std::unexpected(shown + " cannot be resolved: " + ec.message());
    }
    if (!fs::is_directory(canonical, ec)) {
      return std::unexpected(Printable(canonical.string(), 256) +
                             " is not a directory; writable roots are directories");
    }
    return canonical;
  };
}

std::span<const CommandLineFlag> CommandLineFlags() { return kFlags; }

const CommandLineFlag* FindCommandLineFlag(std::string_view name) {
  for (const CommandLineFlag& flag : kFlags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

ParsedPolicyFile BuildCommandLineLayer(const CommandLinePolicy& flags,
                                       const CommandLineContext& context) {
  ParsedPolicyFile layer;
  layer.file.role = PolicyRole::kOperator;  // unused: the layer is told apart by its place
  for (const CommandLineValue& given : flags) {
    const CommandLineFlag* flag = FindCommandLineFlag(given.flag);
    if (flag == nullptr) {
      AddError(layer, std::string(kCommandLineSource) + " " + Printable(given.flag), "flag",
               "not a policy flag; the policy flags are --network, --allow-host, --writable, --env "
               "and --hide");
      continue;
    }
    flag->apply(given, context, layer);
  }
  return layer;
}

}  // namespace ptybox::policy
