// Built-in defaults <- operator file <- command line <- repository file <- client request, with
// the narrowing rules checked on the way. Every violation is collected; the resolver reports the
// first.
#include "policy/layering.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <set>

#include "common/join.h"
#include "policy/command_line.h"
#include "policy/schema.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDefault = "default";
constexpr std::string_view kClientRequest = "client request";

// A source for prose: "default" becomes a phrase, a position stays as it is.
std::string Describe(std::string_view where) {
  if (where == kDefault) return "the built-in default; no operator policy sets it";
  return std::string(where);
}

std::string Quoted(Mode mode) { return "`" + std::string(ToString(mode)) + "`"; }

std::string JoinNames(const std::vector<std::string>& names) {
  return names.empty() ? "(none)" : Join(names);
}

Error Denied(const std::string& where, std::string_view key, const std::string& message) {
  return Error{ErrorKind::kPolicyDenied, where + ": " + std::string(key) + ": " + message, where};
}

class Layers final {
 public:
  explicit Layers(const LayerInputs& inputs)
      : in_(inputs),
        op_(inputs.operator_file),
        cli_(inputs.command_line),
        repo_(inputs.repository_file) {}

  std::expected<ResolvedPolicy, std::vector<Error>> Run() {
    out_.workspace_root = in_.workspace_root;
    out_.sources["workspace"] = in_.workspace_source;
    if (op_ != nullptr) out_.policy_files.push_back(op_->path);
    if (repo_ != nullptr) out_.policy_files.push_back(repo_->path);
    Modes();
    IgnoreRepositoryInDangerFullAccess();
    Network();
    Writable();
    Hide();
    Env();
    LimitValues();
    // Operator only (a repository file cannot set it): the host ids of a root daemon's sessions.
    out_.sources["sessionIds"] = std::string(kDefault);
    if (op_ != nullptr && op_->session_uids) {
      out_.session_uids = op_->session_uids->value;
      out_.sources["sessionIds"] = op_->session_uids->where;
    }
    if (!errors_.empty()) return std::unexpected(std::move(errors_));
    return std::move(out_);
  }

 private:
  void Modes() {
    Mode op_mode = Mode::kWorkspaceWrite;
    std::string op_mode_source(kDefault);
    if (op_ != nullptr && op_->mode) {
      op_mode = op_->mode->value;
      op_mode_source = op_->mode->where;
    }
    out_.ceiling = Mode::kDangerFullAccess;
    std::string ceiling_source(kDefault);
    if (op_ != nullptr && op_->ceiling) {
      out_.ceiling = op_->ceiling->value;
      ceiling_source = op_->ceiling->where;
    }
    out_.sources["ceiling"] = ceiling_source;
    out_.mode = op_mode;
    std::string mode_source = op_mode_source;

    // A requested mode replaces the repository's, so the repository's is not judged then
    // (the error below tells the user exactly that they may request the mode instead).
    if (repo_ != nullptr && repo_->mode && !in_.requested_mode) {
      const Mode asked = repo_->mode->value;
      const std::string op_file = OperatorFile();
      if (!Within(asked, out_.ceiling)) {
        errors_.push_back(Denied(
            repo_->mode->where, "mode",
            Quoted(asked) + " is above the ceiling " + Quoted(out_.ceiling) + " set by " +
                Describe(ceiling_source) +
                "; a repository policy may only narrow the operator policy. Lower `mode` in " +
                repo_->path.string() + ", or raise `ceiling` in " + op_file));
      } else if (!Within(asked, RepositoryModeLimit(op_))) {
        errors_.push_back(Denied(
            repo_->mode->where, "mode",
            Quoted(asked) + " is above the operator's mode " + Quoted(op_mode) + " (" +
                Describe(op_mode_source) +
                "); a repository policy never widens the sandbox to danger-full-access, since "
                "anything running in the workspace could write " +
                repo_->path.filename().string() + ". Lower `mode` in " + repo_->path.string() +
                ", or request the mode explicitly (--mode or policy_set_mode, allowed up to the "
                "ceiling " +
                Quoted(out_.ceiling) + " set by " + Describe(ceiling_source) + ")"));
      } else {
        out_.mode = asked;
        mode_source = repo_->mode->where;
      }
    }
    if (in_.requested_mode) {
      const Mode asked = *in_.requested_mode;
      if (!Within(asked, out_.ceiling)) {
        errors_.push_back(
            Denied(std::string(kClientRequest), "mode",
                   Quoted(asked) +
                       " (requested by the client with policy_set_mode or --mode) is above "
                       "the ceiling " +
                       Quoted(out_.ceiling) + " set by " + Describe(ceiling_source) +
                       "; request a narrower mode, or ask the operator to raise `ceiling` in " +
                       (op_ != nullptr ? op_->path.string() : std::string("the operator policy"))));
      } else {
        out_.mode = asked;
        mode_source = std::string(kClientRequest);
      }
    }
    out_.sources["mode"] = mode_source;
  }

  // Nothing from a repository file reaches a danger-full-access session unless the operator
  // trusts repository files there: the file is reported as ignored. Its `mode` was applied
  // above, which is safe: a repository mode only ever narrows (and a narrower mode is confined,
  // where the file applies in full).
  void IgnoreRepositoryInDangerFullAccess() {
    if (repo_ == nullptr || out_.mode != Mode::kDangerFullAccess) return;
    if (op_ != nullptr && op_->repository_trust_in_danger &&
        op_->repository_trust_in_danger->value) {
      return;
    }
    out_.ignored_repository_file = repo_->path;
    std::erase(out_.policy_files, repo_->path);
    repo_ = nullptr;
  }

  std::string OperatorFile() const {
    if (op_ != nullptr) return op_->path.string();
    return in_.operator_path.empty() ? std::string(kDefaultOperatorPolicy)
                                     : in_.operator_path.string();
  }

  // The command line may allow the network where the operator file says `network: allow`, or,
  // when it says nothing of the network, under the ceiling danger-full-access (the built-in
  // one too), where a client may ask for the host's network anyway. An operator's explicit
  // `network: deny` and a lower ceiling both hold.
  std::optional<Error> CommandLineNetworkDenial(const Located<bool>& asked) const {
    if (op_ != nullptr && op_->network_allowed) {
      return Denied(asked.where, "network",
                    "`allow` is not permitted: the operator denies network (" +
                        op_->network_allowed->where +
                        "); the command line may only narrow what the operator policy allows. "
                        "Drop --network allow, or ask the operator to allow network in " +
                        OperatorFile());
    }
    if (out_.ceiling == Mode::kDangerFullAccess) return std::nullopt;
    return Denied(asked.where, "network",
                  "`allow` is not permitted: the operator's ceiling " + Quoted(out_.ceiling) +
                      " (" + Describe(out_.sources.at("ceiling")) +
                      ") confines sessions and the operator policy does not allow network; the "
                      "command line may allow it only where the operator policy says `network: "
                      "allow` or keeps the ceiling `danger-full-access`. Drop --network allow, or "
                      "ask the operator to set `network: allow` in " +
                      OperatorFile());
  }

  void Network() {
    bool allowed = false;
    std::optional<NetworkNames> names;
    std::string source(kDefault);
    if (op_ != nullptr && op_->network_names) {
      const auto& lists = op_->network_names->value;
      names = NetworkNames{lists.allow.value_or(std::vector<NetworkRule>{}), lists.deny,
                           op_->network_names->where};
      source = op_->network_names->where;
    } else if (op_ != nullptr && op_->network_allowed) {
      allowed = op_->network_allowed->value;
      source = op_->network_allowed->where;
    }
    if (cli_ != nullptr && cli_->network_allowed) {
      const Located<bool>& asked = *cli_->network_allowed;
      std::optional<Error> denial;
      if (asked.value && names) {
        // Under the operator's list of names, allowing all would widen it.
        denial = Denied(asked.where, "network",
                        "`allow` is not permitted: the operator allows only the names listed at " +
                            Describe(source) +
                            "; the command line may only narrow what the operator policy "
                            "allows. Drop --network allow, or ask the operator to change " +
                            OperatorFile());
      } else if (asked.value && !allowed) {
        denial = CommandLineNetworkDenial(asked);
      }
      if (denial) {
        errors_.push_back(std::move(*denial));
      } else {
        allowed = asked.value;
        if (!asked.value) names.reset();  // --network deny: not even the listed names
        source = std::string(kCommandLineSource);
      }
    }
    if (cli_ != nullptr && cli_->network_names) CommandLineNames(allowed, names, source);
    if (repo_ != nullptr && repo_->network_allowed) {
      if (repo_->network_allowed->value && !allowed) {
        const std::string denier =
            source == kCommandLineSource
                ? "the command line denies network (" + cli_->network_allowed->where + ")"
                : "the operator denies network (" + Describe(source) + ")";
        const std::string what =
            names ? "the operator allows only the names listed at " + Describe(source) +
                        "; a repository policy may narrow that list (`network: {allow: [...], "
                        "deny: [...]}` with names from it) or deny network, never allow all. "
                        "Remove `network: allow` from " +
                        repo_->path.string()
                  : denier +
                        "; a repository policy may deny network but never allow it. Remove "
                        "`network: allow` from " +
                        repo_->path.string() + ", or ask the operator to allow network";
        errors_.push_back(
            Denied(repo_->network_allowed->where, "network", "`allow` is not permitted: " + what));
      } else {
        allowed = repo_->network_allowed->value;
        names.reset();
        source = repo_->network_allowed->where;
      }
    } else if (repo_ != nullptr && repo_->network_names) {
      RepositoryNames(allowed, names, source);
    }
    out_.network_allowed = allowed;
    out_.network_names = std::move(names);
    out_.sources["network"] = source;
  }

  // Who narrows the network by name, and how a refusal tells them to fix it.
  struct NamesLayer {
    const PolicyFile::NetworkLists& lists;
    const std::string& where;
    std::string who;                                     // "a repository policy"
    std::function<std::string(const std::string&)> fix;  // "Remove it from FILE" for an item
  };

  // The command line's --allow-host: a list of names, narrower than --network allow, so
  // permitted wherever that would be (no operator network setting under the ceiling
  // danger-full-access), and otherwise only within the operator's list.
  void CommandLineNames(bool& allowed, std::optional<NetworkNames>& names, std::string& source) {
    const auto& lists = cli_->network_names->value;
    if (!allowed && !names &&
        !CommandLineNetworkDenial(Located<bool>{true, cli_->network_names->where})) {
      allowed = true;
    }
    NarrowNames(NamesLayer{lists, cli_->network_names->where, "the command line",
                           [this](const std::string& item) {
                             return "Drop --allow-host " + item +
                                    ", or ask the operator to allow it in " + OperatorFile();
                           }},
                allowed, names, source);
  }

  // A repository's `network: {allow, deny}`: it may only narrow.
  void RepositoryNames(bool& allowed, std::optional<NetworkNames>& names, std::string& source) {
    const std::string path = repo_->path.string();
    NarrowNames(
        NamesLayer{repo_->network_names->value, repo_->network_names->where, "a repository policy",
                   [path](const std::string& /*item*/) {
                     return "Remove it from " + path + ", or ask the operator to allow it";
                   }},
        allowed, names, source);
  }

  // A layer's `{allow, deny}` under what the layers above it decided. Under `allow` (all) its
  // list replaces "everything"; under a list its allows must lie within it (each checked with
  // Covers) and its denies add up; under `deny` it may allow nothing.
  void NarrowNames(const NamesLayer& layer, bool& allowed, std::optional<NetworkNames>& names,
                   std::string& source) {
    const auto& lists = layer.lists;
    const std::string& where = layer.where;
    if (allowed) {
      if (!lists.allow) {
        errors_.push_back(Denied(where, "network",
                                 "a list needs `allow` when the operator allows all network (" +
                                     Describe(source) +
                                     "): write the names the sessions need, like `{allow: "
                                     "[registry.npmjs.org], deny: [...]}`, in " +
                                     (repo_ != nullptr ? repo_->path.string() : layer.who)));
        return;
      }
      allowed = false;
      names = NetworkNames{*lists.allow, lists.deny, where};
      source = where;
      return;
    }
    if (!names) {
      if (lists.allow && !lists.allow->empty()) {
        const NetworkRule& first = lists.allow->front();
        const std::string denier =
            source == kCommandLineSource && cli_ != nullptr && cli_->network_allowed
                ? "the command line denies network (" + cli_->network_allowed->where + ")"
                : "the operator denies network (" + Describe(source) + ")";
        errors_.push_back(Denied(
            first.where, "network.allow",
            "`" + ToString(first.pattern) + "` is not permitted: " + denier + "; " + layer.who +
                " may deny network but never allow a name. " + layer.fix(ToString(first.pattern))));
      }
      return;
    }
    if (lists.allow) {
      for (const NetworkRule& rule : *lists.allow) {
        const bool covered = std::any_of(
            names->allow.begin(), names->allow.end(),
            [&](const NetworkRule& outer) { return Covers(outer.pattern, rule.pattern); });
        if (!covered) {
          errors_.push_back(Denied(rule.where, "network.allow",
                                   "`" + ToString(rule.pattern) +
                                       "` is not permitted: it is not within the operator's "
                                       "allow list (" +
                                       source + "); " + layer.who + " may only narrow that list. " +
                                       layer.fix(ToString(rule.pattern))));
        }
      }
      names->allow = *lists.allow;
    }
    names->deny.insert(names->deny.end(), lists.deny.begin(), lists.deny.end());
    source = source + " narrowed by " + where;
    names->source = source;
  }

  void Writable() {
    std::vector<std::string> sources;
    std::set<fs::path> seen;
    std::vector<const Located<fs::path>*> added;
    auto add = [&](const Located<fs::path>& root) {
      added.push_back(&root);
      if (seen.insert(root.value).second) out_.writable_roots.push_back(root.value);
    };
    if (op_ != nullptr && op_->writable_where) {
      sources.push_back(*op_->writable_where);
      for (const auto& root : op_->writable) add(root);
    }
    if (cli_ != nullptr && cli_->writable_where) {
      sources.emplace_back(kCommandLineSource);
      for (const auto& root : cli_->writable) {
        if (std::optional<Error> denial = CommandLineWritableDenial(root)) {
          errors_.push_back(std::move(*denial));
        } else {
          add(root);
        }
      }
    }
    if (repo_ != nullptr && repo_->writable_where) {
      sources.push_back(*repo_->writable_where);
      std::vector<Error> outside = CheckRepositoryWritable(*repo_, in_.workspace_root);
      errors_.insert(errors_.end(), outside.begin(), outside.end());
      for (const auto& root : repo_->writable) {
        if (IsWithin(root.value, in_.workspace_root)) add(root);
      }
    }
    const std::string joined = Join(sources);
    out_.sources["writable"] = joined.empty() ? std::string(kDefault) : joined;
    // A root inside a repository's .git would silently stay read-only: say so instead.
    std::vector<fs::path> granting = out_.writable_roots;
    granting.push_back(in_.workspace_root);
    for (const Located<fs::path>* root : added) {
      const std::optional<fs::path> git = ProtectedGitAround(root->value, granting);
      if (!git) continue;
      errors_.push_back(Denied(
          root->where, "writable",
          Printable(root->value.string(), 256) + " lies inside the repository data " +
              Printable(git->string(), 256) +
              ", which every workspace-write session gets read-only (every repository's .git "
              "in the workspace and the writable roots is protected: docs/security.md, "
              "\"Protected paths\"), so it would not be writable. Remove it; change that "
              "repository's .git from the host or a danger-full-access session"));
    }
  }

  // A command-line root lies in the workspace or in a root the operator file grants, unless the
  // operator keeps the ceiling danger-full-access (the built-in one too), where a client may
  // ask for every directory anyway.
  std::optional<Error> CommandLineWritableDenial(const Located<fs::path>& root) const {
    if (out_.ceiling == Mode::kDangerFullAccess || IsWithin(root.value, in_.workspace_root)) {
      return std::nullopt;
    }
    std::vector<std::string> granted = {Printable(in_.workspace_root.string(), 256)};
    if (op_ != nullptr) {
      for (const auto& allowed : op_->writable) {
        if (IsWithin(root.value, allowed.value)) return std::nullopt;
        granted.push_back(Printable(allowed.value.string(), 256));
      }
    }
    return Denied(root.where, "writable",
                  Printable(root.value.string(), 256) +
                      " is outside the workspace and the operator's writable roots (" +
                      Join(granted) +
                      "; symbolic links and `..` resolved), and the operator's ceiling " +
                      Quoted(out_.ceiling) + " (" + Describe(out_.sources.at("ceiling")) +
                      ") keeps the command line within them. Name a directory inside them, or "
                      "ask the operator to list it under `writable` in " +
                      OperatorFile());
  }

  // The operator's list (or the default one), then the command line's and the repository's
  // additions: neither can reveal what the operator hides.
  void Hide() {
    std::vector<std::string> sources;
    auto add = [&](const std::string& path) {
      if (std::find(out_.hidden.begin(), out_.hidden.end(), path) == out_.hidden.end()) {
        out_.hidden.push_back(path);
      }
    };
    if (op_ != nullptr && op_->hide_where) {
      sources.push_back(*op_->hide_where);
      for (const auto& path : op_->hide) add(path.value);
    } else {
      sources.emplace_back(kDefault);
      for (std::string_view path : DefaultHidden()) add(std::string(path));
    }
    if (cli_ != nullptr && cli_->hide_where) {
      sources.emplace_back(kCommandLineSource);
      for (const auto& path : cli_->hide) add(path.value);
    }
    if (repo_ != nullptr && repo_->hide_where) {
      sources.push_back(*repo_->hide_where);
      for (const auto& path : repo_->hide) add(path.value);
    }
    out_.sources["hide"] = Join(sources);
  }

  // The operator's env.set holds against the command line: its values are the operator's.
  // `name` is what the flag named (the key of a pass names the variable itself).
  Error OperatorSetsDenial(const Located<std::string>& given, const std::string& key,
                           const std::string& name = {}) const {
    const std::string& variable = name.empty() ? given.value : name;
    return Denied(given.where, key,
                  "the operator policy sets `" + variable + "` (" +
                      op_->env_set.at(variable).where +
                      "); the command line may add variables but not change the operator's. "
                      "Drop --env " +
                      variable);
  }

  void Env() {
    EnvPass();
    EnvSet();
    EnvSource();
  }

  // env.pass: the operator's list (or the default one); a repository list must be a subset.
  void EnvPass() {
    std::vector<std::string> pass;
    std::string pass_source(kDefault);
    if (op_ != nullptr && op_->env_pass_where) {
      for (const auto& name : op_->env_pass) pass.push_back(name.value);
      pass_source = *op_->env_pass_where;
    } else {
      for (std::string_view name : DefaultEnvPass()) pass.emplace_back(name);
    }
    // The command line's --env NAME: added to what the operator passes (the names are ptybox's
    // own environment, which the person who started it holds anyway).
    bool cli_passes = false;
    if (cli_ != nullptr && cli_->env_pass_where) {
      for (const auto& name : cli_->env_pass) {
        if (op_ != nullptr && op_->env_set.contains(name.value)) {
          errors_.push_back(OperatorSetsDenial(name, "env.pass"));
          continue;
        }
        if (std::find(pass.begin(), pass.end(), name.value) == pass.end()) {
          pass.push_back(name.value);
        }
      }
      pass_source = pass_source + ", " + std::string(kCommandLineSource);
      cli_passes = true;
    }
    if (repo_ != nullptr && repo_->env_pass_where) {
      std::vector<std::string> narrowed;
      for (const auto& name : repo_->env_pass) {
        if (std::find(pass.begin(), pass.end(), name.value) == pass.end()) {
          errors_.push_back(
              Denied(name.where, "env.pass",
                     "`" + name.value + "` is not passed by the operator policy" +
                         (cli_passes ? std::string(" or the command line") : std::string()) + " (" +
                         Describe(pass_source) +
                         "); a repository policy may pass only names the operator passes: " +
                         JoinNames(pass) + ". Remove it"));
          continue;
        }
        narrowed.push_back(name.value);
      }
      pass = std::move(narrowed);
      pass_source = *repo_->env_pass_where;
    }
    out_.env.pass = std::move(pass);
    out_.sources["env.pass"] = pass_source;
  }

  // env.set: the operator's values, plus repository names the operator does not set.
  void EnvSet() {
    std::vector<std::string> set_sources;
    if (op_ != nullptr) {
      for (const auto& [name, value] : op_->env_set) out_.env.set[name] = value.value;
      if (op_->env_set_where) set_sources.push_back(*op_->env_set_where);
    }
    // The command line's --env NAME=VALUE: any name the shell does not own (checked with the
    // flag), except one the operator sets, whose value holds.
    if (cli_ != nullptr) {
      for (const auto& [name, value] : cli_->env_set) {
        if (op_ != nullptr && op_->env_set.contains(name)) {
          errors_.push_back(OperatorSetsDenial(value, "env.set." + name, name));
          continue;
        }
        out_.env.set[name] = value.value;
      }
      if (cli_->env_set_where) set_sources.emplace_back(kCommandLineSource);
    }
    std::vector<std::string> repo_allowed;
    std::string allowed_source(kDefault);
    if (op_ != nullptr && op_->repository_env_set_where) {
      for (const auto& name : op_->repository_env_set) repo_allowed.push_back(name.value);
      allowed_source = *op_->repository_env_set_where;
    } else {
      for (std::string_view name : DefaultRepositoryEnvSet()) repo_allowed.emplace_back(name);
    }
    const std::string op_file = OperatorFile();
    if (repo_ != nullptr) {
      for (const auto& [name, value] : repo_->env_set) {
        if (op_ != nullptr) {
          if (auto found = op_->env_set.find(name); found != op_->env_set.end()) {
            errors_.push_back(Denied(
                value.where, "env.set." + name,
                "the operator policy sets `" + name + "` (" + found->second.where +
                    "); a repository policy may add variables but not change the operator's. "
                    "Remove it"));
            continue;
          }
        }
        if (cli_ != nullptr) {
          if (auto found = cli_->env_set.find(name); found != cli_->env_set.end()) {
            errors_.push_back(Denied(value.where, "env.set." + name,
                                     "the command line sets `" + name + "` (" +
                                         found->second.where +
                                         "); a repository policy may add variables but not "
                                         "change those of whoever started ptybox. Remove it"));
            continue;
          }
        }
        if (auto reason = CodeLoadingEnvReason(name)) {
          errors_.push_back(Denied(value.where, "env.set." + name,
                                   *reason +
                                       ". Remove it (an operator can set it in the "
                                       "operator policy's `env.set`, " +
                                       op_file + ")"));
          continue;
        }
        if (std::find(repo_allowed.begin(), repo_allowed.end(), name) == repo_allowed.end()) {
          errors_.push_back(Denied(
              value.where, "env.set." + name,
              "`" + name + "` is not among the names a repository policy may set (" +
                  Describe(allowed_source) + "): " + JoinNames(repo_allowed) +
                  ". Remove it, or ask the operator to list it under `repository.envSet` in " +
                  op_file));
          continue;
        }
        out_.env.set[name] = value.value;
      }
      if (repo_->env_set_where) set_sources.push_back(*repo_->env_set_where);
    }
    const std::string joined = Join(set_sources);
    out_.sources["env.set"] = joined.empty() ? std::string(kDefault) : joined;
  }

  // Where the `env` key itself came from, layer by layer.
  void EnvSource() {
    std::string env_source(kDefault);
    if (op_ != nullptr && op_->env_where) env_source = *op_->env_where;
    if (cli_ != nullptr && cli_->env_where) {
      env_source = env_source == kDefault ? std::string(kCommandLineSource)
                                          : env_source + ", " + std::string(kCommandLineSource);
    }
    if (repo_ != nullptr && repo_->env_where) {
      env_source =
          env_source == kDefault ? *repo_->env_where : env_source + ", " + *repo_->env_where;
    }
    out_.sources["env"] = env_source;
  }

  void LimitValues() {
    for (const LimitSpec& spec : LimitSpecs()) {
      std::string source(kDefault);
      if (op_ != nullptr) {
        if (auto found = op_->limits.find(spec.key); found != op_->limits.end()) {
          spec.Set(out_.limits, found->second.value);
          source = found->second.where;
        }
      }
      const std::string key = "limits." + std::string(spec.key);
      if (repo_ != nullptr) {
        if (auto found = repo_->limits.find(spec.key); found != repo_->limits.end()) {
          const int64_t asked = found->second.value;
          const std::optional<int64_t> current = spec.Get(out_.limits);
          if (spec.rule == LimitRule::kOperatorOnly) {
            errors_.push_back(Denied(
                found->second.where, key,
                "only the operator policy may set it: its value holds for every owner of the "
                "daemon, and a repository file can be written by anything running in the "
                "workspace. Remove it (the value in force is " +
                    (current ? std::to_string(*current) : std::string("inherit")) + ", " +
                    Describe(source) + ")"));
          } else if (asked < spec.repository_min) {
            errors_.push_back(Denied(
                found->second.where, key,
                std::to_string(asked) + " is below " + std::to_string(spec.repository_min) +
                    ", the least a repository policy may ask: a smaller value costs every "
                    "owner of the daemon, not only this workspace's sessions. Use at least " +
                    std::to_string(spec.repository_min) + " (an operator may set less)"));
          } else if (spec.rule == LimitRule::kLowerOnly && current && asked > *current) {
            errors_.push_back(Denied(
                found->second.where, key,
                std::to_string(asked) + " is above the operator's " + std::to_string(*current) +
                    " (" + Describe(source) +
                    "); a repository policy may lower resource limits, never raise them. Use "
                    "at most " +
                    std::to_string(*current)));
          } else {
            spec.Set(out_.limits, asked);
            source = found->second.where;
          }
        }
      }
      out_.sources[key] = source;
    }
  }

  const LayerInputs& in_;
  const PolicyFile* op_;
  const PolicyFile* cli_;  // the command line's policy flags (policy/command_line.h)
  const PolicyFile* repo_;
  ResolvedPolicy out_;
  std::vector<Error> errors_;
};

}  // namespace

std::expected<ResolvedPolicy, std::vector<Error>> Combine(const LayerInputs& inputs) {
  return Layers(inputs).Run();
}

Mode RepositoryModeLimit(const PolicyFile* operator_file) {
  const Mode op_mode = operator_file != nullptr && operator_file->mode ? operator_file->mode->value
                                                                       : Mode::kWorkspaceWrite;
  if (op_mode == Mode::kDangerFullAccess) return Mode::kDangerFullAccess;
  const Mode ceiling = operator_file != nullptr && operator_file->ceiling
                           ? operator_file->ceiling->value
                           : Mode::kDangerFullAccess;
  return Within(ceiling, Mode::kWorkspaceWrite) ? ceiling : Mode::kWorkspaceWrite;
}

bool IsWithin(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  if (r == root.end()) return true;
  // "/a/b/" ends with an empty component; "/a/b" and "/a/b/c" are within it.
  return r->empty() && std::next(r) == root.end();
}

std::optional<fs::path> ProtectedGitAround(const fs::path& path,
                                           const std::vector<fs::path>& roots) {
  for (const fs::path& root : roots) {
    if (root.empty() || path == root || !IsWithin(path, root)) continue;
    fs::path at = root;
    auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
    (void)r;
    for (; p != path.end(); ++p) {
      at /= *p;
      if (*p == ".git") return at;
    }
  }
  return std::nullopt;
}

std::vector<Error> CheckRepositoryWritable(const PolicyFile& repository,
                                           const fs::path& workspace_root) {
  std::vector<Error> errors;
  for (size_t i = 0; i < repository.writable.size(); ++i) {
    const auto& root = repository.writable[i];
    if (IsWithin(root.value, workspace_root)) continue;
    errors.push_back(Denied(root.where, "writable",
                            Printable(root.value.string(), 256) + " is outside the workspace " +
                                Printable(workspace_root.string(), 256) +
                                " (symbolic links and `..` resolved); a repository policy may "
                                "only name directories inside the workspace. Remove it"));
  }
  return errors;
}

}  // namespace ptybox::policy
