// Walks the bounded YAML tree of one policy file, collecting every problem it can find
// rather than stopping at the first, so `ptybox policy check` lists them all at once.
#include "policy/policy_file.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <system_error>

#include "common/join.h"
#include "policy/mode_names.h"
#include "policy/network_names.h"
#include "policy/yaml_tree.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;
using Kind = YamlNode::Kind;

// An integer written plainly: [+-]?[0-9]+. `overflow` tells "too large" from "not a number".
std::optional<int64_t> ParseInteger(std::string_view text, bool& overflow) {
  overflow = false;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    overflow = true;
    return std::nullopt;
  }
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// "`text`" for a scalar, the kind otherwise: the "got ..." part of a message.
std::string Got(const YamlNode& node) {
  if (node.kind != Kind::kScalar) return std::string(DescribeKind(node));
  if (node.plain) return "`" + Printable(node.value) + "`";
  return "\"" + Printable(node.value) + "\" (a quoted string)";
}

std::string ErrnoText(const std::error_code& ec) {
  if (ec == std::errc::no_such_file_or_directory) return "does not exist";
  if (ec == std::errc::not_a_directory) return "does not exist (a parent is not a directory)";
  return "cannot be resolved: " + ec.message();
}

class FileParser final {
 public:
  FileParser(const fs::path& path, PolicyRole role) : dir_(path.parent_path()) {
    out_.file.path = path;
    out_.file.role = role;
  }

  ParsedPolicyFile Run(const PolicyYaml& yaml) {
    if (!yaml.tree) {
      AddError(yaml.error.line, yaml.error.column, yaml.error_key, yaml.error.message);
      return std::move(out_);
    }
    const YamlNode& root = *yaml.tree;
    if (root.kind == Kind::kNull) {
      AddError(1, 1, "version", "the file is empty; a policy needs at least `version: 1`");
      return std::move(out_);
    }
    if (root.kind != Kind::kMap) {
      AddError(root, "document",
               "expected a mapping of keys such as `version: 1`, got " + Got(root));
      return std::move(out_);
    }
    bool has_version = false;
    ForEachEntry(root, "", [&](const std::string& key, const YamlNode& k, const YamlNode& v) {
      if (key == "version") {
        has_version = true;
        Version(k, v);
      } else if (key == "mode") {
        if (auto mode = ModeValue(k, v, "mode")) out_.file.mode = Located<Mode>{*mode, Pos(k, v)};
      } else if (IsOperatorOnlyKey(key)) {
        if (out_.file.role == PolicyRole::kRepository) {
          AddError(k, key,
                   "only the operator policy may set `" + key +
                       "`; a repository policy cannot widen or move the sandbox. Remove it "
                       "(operators set it in " +
                       kDefaultOperatorPolicy + " or the --policy file)");
        } else if (key == "ceiling") {
          if (auto mode = ModeValue(k, v, "ceiling")) {
            out_.file.ceiling = Located<Mode>{*mode, Pos(k, v)};
          }
        } else if (key == "repository") {
          Repository(k, v);
        } else if (key == "sessionIds") {
          SessionUids(k, v);
        } else if (key == "audit") {
          Audit(k, v);
        } else {
          Workspace(k, v);
        }
      } else if (key == "writable") {
        Writable(k, v);
      } else if (key == "network") {
        Network(k, v);
      } else if (key == "env") {
        Env(k, v);
      } else if (key == "limits") {
        LimitsMap(k, v);
      } else if (key == "hide") {
        Hide(k, v);
      } else {
        Unknown(k, "", KnownTopLevel());
      }
    });
    if (!has_version) {
      AddError(root, "version", "missing; add `version: 1` as the first line");
    }
    if (out_.file.mode && out_.file.ceiling &&
        !Within(out_.file.mode->value, out_.file.ceiling->value)) {
      // One file asks for more than it allows itself: the ceiling wins, nothing is implied.
      AddError(ErrorKind::kPolicyDenied, out_.file.mode->where, "mode",
               "`" + std::string(ToString(out_.file.mode->value)) + "` is above the ceiling `" +
                   std::string(ToString(out_.file.ceiling->value)) + "` set at " +
                   out_.file.ceiling->where +
                   " in the same file; lower `mode` or raise "
                   "`ceiling`");
    }
    std::stable_sort(out_.errors.begin(), out_.errors.end(),
                     [](const Error& a, const Error& b) { return PositionOf(a) < PositionOf(b); });
    return std::move(out_);
  }

 private:
  // (line, column) parsed back from an error's "file:line:col" context, for sorting.
  static std::pair<int, int> PositionOf(const Error& error) {
    const std::string& c = error.context;
    size_t last = c.rfind(':');
    size_t middle =
        last == std::string::npos || last == 0 ? std::string::npos : c.rfind(':', last - 1);
    if (middle == std::string::npos) return {0, 0};
    int line = 0;
    int column = 0;
    std::from_chars(c.data() + middle + 1, c.data() + last, line);
    std::from_chars(c.data() + last + 1, c.data() + c.size(), column);
    return {line, column};
  }

  std::span<const std::string_view> KnownTopLevel() const {
    static const std::vector<std::string_view> repository = [] {
      std::vector<std::string_view> keys;
      for (std::string_view key : TopLevelKeys()) {
        if (!IsOperatorOnlyKey(key)) keys.push_back(key);
      }
      return keys;
    }();
    if (out_.file.role == PolicyRole::kOperator) return TopLevelKeys();
    return repository;
  }

  // Null values get the key's position (yaml-cpp marks them at the following token).
  std::string Pos(const YamlNode& key, const YamlNode& value) const {
    const YamlNode& at = value.kind == Kind::kNull ? key : value;
    return Where(out_.file.path, at.line, at.column);
  }
  static const YamlNode& At(const YamlNode& key, const YamlNode& value) {
    return value.kind == Kind::kNull ? key : value;
  }

  void AddError(ErrorKind kind, const std::string& where, std::string_view key,
                const std::string& message) {
    out_.errors.push_back(Error{kind, where + ": " + std::string(key) + ": " + message, where});
  }
  void AddError(int line, int column, std::string_view key, const std::string& message) {
    AddError(ErrorKind::kPolicyError, Where(out_.file.path, line, column), key, message);
  }
  void AddError(const YamlNode& at, std::string_view key, const std::string& message) {
    AddError(at.line, at.column, key, message);
  }

  // Calls `handle(key text, key node, value node)` for each key's first occurrence; a repeated
  // key is an error (YAML parsers disagree on which one wins, so we accept neither silently).
  template <typename Handle>
  void ForEachEntry(const YamlNode& map, const std::string& prefix, Handle handle) {
    std::map<std::string, const YamlNode*> seen;
    for (const auto& [k, v] : map.entries) {
      const std::string path =
          prefix.empty() ? Printable(k.value) : prefix + "." + Printable(k.value);
      auto [it, fresh] = seen.emplace(k.value, &k);
      if (!fresh) {
        AddError(k, path,
                 "duplicate key (first at line " + std::to_string(it->second->line) + ", column " +
                     std::to_string(it->second->column) + "); keep only one");
        continue;
      }
      handle(k.value, k, v);
    }
  }

  void Unknown(const YamlNode& key, const std::string& prefix,
               std::span<const std::string_view> known) {
    const std::string path =
        prefix.empty() ? Printable(key.value) : prefix + "." + Printable(key.value);
    std::string message = "unknown key";
    if (auto suggestion = SuggestKey(key.value, known)) {
      message += "; did you mean `" + std::string(*suggestion) + "`?";
    } else {
      message += "; expected one of: " + Join(known);
    }
    AddError(key, path, message);
  }

  std::optional<std::string> StringValue(const YamlNode& k, const YamlNode& v,
                                         const std::string& path, std::string_view expected) {
    if (v.kind != Kind::kScalar) {
      AddError(At(k, v), path, "expected " + std::string(expected) + ", got " + Got(v));
      return std::nullopt;
    }
    return v.value;
  }

  void Version(const YamlNode& k, const YamlNode& v) {
    bool overflow = false;
    std::optional<int64_t> number;
    if (v.kind == Kind::kScalar && v.plain) number = ParseInteger(v.value, overflow);
    if (number == 1) return;
    if (number) {
      AddError(
          v, "version",
          "unsupported version " + std::to_string(*number) + "; this ptybox reads version 1 files");
      return;
    }
    AddError(At(k, v), "version", "expected the number 1, got " + Got(v));
  }

  std::optional<Mode> ModeValue(const YamlNode& k, const YamlNode& v, const std::string& path) {
    static const std::string expected = [] {
      std::string list;
      for (std::string_view name : kModeNames) {
        list += (list.empty() ? "one of " : ", ") + std::string(name);
      }
      return list;
    }();
    auto text = StringValue(k, v, path, expected);
    if (!text) return std::nullopt;
    if (auto mode = ParseMode(*text)) return mode;
    std::string message = "expected " + expected + ", got " + Got(v);
    if (auto suggestion = SuggestKey(*text, kModeNames)) {
      message += "; did you mean `" + std::string(*suggestion) + "`?";
    }
    AddError(v, path, message);
    return std::nullopt;
  }

  // A path string: non-empty, no NUL, bounded; relative ones resolve against the file's
  // directory. Returns the absolute, lexically normal path.
  std::optional<fs::path> PathValue(const YamlNode& k, const YamlNode& v, const std::string& path) {
    auto text = StringValue(k, v, path, "a path");
    if (!text) return std::nullopt;
    if (text->empty()) {
      AddError(v, path, "expected a path, got an empty string");
      return std::nullopt;
    }
    if (text->find('\0') != std::string::npos || text->size() > kMaxPathBytes) {
      AddError(v, path,
               "expected a path of at most " + std::to_string(kMaxPathBytes) +
                   " bytes without NUL characters");
      return std::nullopt;
    }
    fs::path value(*text);
    if (value.is_relative()) value = dir_ / value;
    return value.lexically_normal();
  }

  void Workspace(const YamlNode& k, const YamlNode& v) {
    if (auto value = PathValue(k, v, "workspace")) {
      out_.file.workspace = Located<fs::path>{*value, Pos(k, v)};
    }
  }

  void Writable(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kSequence) {
      AddError(At(k, v), "writable",
               "expected a list of directories, like `writable: [build]`, got " + Got(v));
      return;
    }
    out_.file.writable_where = Pos(k, v);
    if (v.items.size() > kMaxListEntries) {
      AddError(v, "writable",
               "has " + std::to_string(v.items.size()) + " entries; at most " +
                   std::to_string(kMaxListEntries) + " are allowed");
      return;
    }
    std::set<fs::path> seen;
    for (size_t i = 0; i < v.items.size(); ++i) {
      const YamlNode& item = v.items[i];
      const std::string path = "writable[" + std::to_string(i) + "]";
      auto lexical = PathValue(item, item, path);
      if (!lexical) continue;
      std::error_code ec;
      fs::path canonical = fs::canonical(*lexical, ec);
      if (ec) {
        AddError(item, path,
                 Printable(lexical->string(), 256) + " " + ErrnoText(ec) +
                     "; create the directory or remove the entry");
        continue;
      }
      if (!fs::is_directory(canonical, ec)) {
        AddError(item, path,
                 Printable(canonical.string(), 256) +
                     " is not a directory; writable roots are directories");
        continue;
      }
      if (!seen.insert(canonical).second) continue;  // the same directory twice is harmless
      out_.file.writable.push_back(
          Located<fs::path>{canonical, Where(out_.file.path, item.line, item.column)});
    }
  }

  // `hide`: paths hidden from confined sessions. "~/rest" stays as written (every home
  // directory, expanded at each spawn); other paths resolve like `writable` but need not exist.
  void Hide(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kSequence) {
      AddError(At(k, v), "hide",
               "expected a list of paths, like `hide: [~/.ssh, /etc/secret]`, got " + Got(v));
      return;
    }
    out_.file.hide_where = Pos(k, v);
    if (v.items.size() > kMaxListEntries) {
      AddError(v, "hide",
               "has " + std::to_string(v.items.size()) + " entries; at most " +
                   std::to_string(kMaxListEntries) + " are allowed");
      return;
    }
    for (size_t i = 0; i < v.items.size(); ++i) {
      const YamlNode& item = v.items[i];
      const std::string path = "hide[" + std::to_string(i) + "]";
      std::string value;
      if (item.kind == Kind::kScalar && item.value.starts_with("~")) {
        std::optional<std::string> home = NormalHomeHide(item.value);
        if (!home) {
          AddError(item, path,
                   "`" + Printable(item.value, 256) +
                       "`: `~` must be followed by `/` and a path inside the home directory, "
                       "like `~/.ssh` (it stands for every home directory)");
          continue;
        }
        value = std::move(*home);
      } else {
        auto lexical = PathValue(item, item, path);
        if (!lexical) continue;
        value = lexical->string();
        if (auto reason = UncoverableHideReason(value)) {
          AddError(item, path, *reason);
          continue;
        }
      }
      out_.file.hide.push_back(
          Located<std::string>{value, Where(out_.file.path, item.line, item.column)});
    }
  }

  void Network(const YamlNode& k, const YamlNode& v) {
    if (v.kind == Kind::kMap) {
      NetworkMap(k, v);
      return;
    }
    auto text = StringValue(k, v, "network", "`deny`, `allow` or a mapping `{allow: [...]}`");
    if (!text) return;
    if (*text == NetworkName(false) || *text == NetworkName(true)) {
      out_.file.network_allowed = Located<bool>{*text == NetworkName(true), Pos(k, v)};
      return;
    }
    std::string message = "expected `deny` or `allow`, got " + Got(v);
    if (auto suggestion = SuggestKey(*text, kNetworkNames)) {
      message += "; did you mean `" + std::string(*suggestion) + "`?";
    } else if (v.plain && (*text == "true" || *text == "false" || *text == "yes" || *text == "no" ||
                           *text == "on" || *text == "off")) {
      message += "; write the word `allow` or `deny`, not a boolean";
    }
    AddError(v, "network", message);
  }

  // `network: {allow: [patterns], deny: [patterns]}`: network by name (policy/host_pattern.h).
  void NetworkMap(const YamlNode& k, const YamlNode& v) {
    PolicyFile::NetworkLists lists;
    bool ok = true;
    ForEachEntry(v, "network", [&](const std::string& key, const YamlNode& nk, const YamlNode& nv) {
      if (key != "allow" && key != "deny") {
        static constexpr std::array<std::string_view, 2> kKeys = {"allow", "deny"};
        Unknown(nk, "network", kKeys);
        ok = false;
        return;
      }
      std::vector<NetworkRule> rules;
      if (!Patterns(nk, nv, "network." + key, rules)) ok = false;
      if (key == "allow") {
        lists.allow = std::move(rules);
      } else {
        lists.deny = std::move(rules);
      }
    });
    if (ok)
      out_.file.network_names = Located<PolicyFile::NetworkLists>{std::move(lists), Pos(k, v)};
  }

  bool Patterns(const YamlNode& k, const YamlNode& v, const std::string& path,
                std::vector<NetworkRule>& out) {
    if (v.kind != Kind::kSequence) {
      AddError(
          At(k, v), path,
          "expected a list of host patterns, like `[registry.npmjs.org, \"*.example.org:8443\"]`, "
          "got " +
              Got(v));
      return false;
    }
    if (v.items.size() > kMaxHostPatterns) {
      AddError(v, path,
               "has " + std::to_string(v.items.size()) + " entries; at most " +
                   std::to_string(kMaxHostPatterns) + " are allowed");
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < v.items.size(); ++i) {
      const YamlNode& item = v.items[i];
      const std::string at = path + "[" + std::to_string(i) + "]";
      auto text = StringValue(item, item, at, "a host pattern");
      if (!text) {
        ok = false;
        continue;
      }
      auto pattern = ParseHostPattern(*text);
      if (!pattern) {
        AddError(item, at, "`" + Printable(*text, 256) + "`: " + pattern.error());
        ok = false;
        continue;
      }
      out.push_back(NetworkRule{*pattern, Where(out_.file.path, item.line, item.column)});
    }
    return ok;
  }

  // A name under env.pass or env.set: valid and not reserved (policy/schema.h's one rule).
  bool EnvName(const YamlNode& at, const std::string& path, const std::string& name, EnvUse use) {
    if (auto problem = EnvNameProblem(name, use)) {
      AddError(at, path, *problem + "; remove it");
      return false;
    }
    return true;
  }

  void Repository(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "repository",
               "expected a mapping like `repository: {envSet: [CI], trustInDangerFullAccess: "
               "false}`, got " +
                   Got(v));
      return;
    }
    ForEachEntry(
        v, "repository", [&](const std::string& key, const YamlNode& rk, const YamlNode& rv) {
          if (key == "envSet") {
            RepositoryEnvSet(rk, rv);
          } else if (key == "trustInDangerFullAccess") {
            const bool is_bool =
                rv.kind == Kind::kScalar && rv.plain && (rv.value == "true" || rv.value == "false");
            if (!is_bool) {
              AddError(At(rk, rv), "repository.trustInDangerFullAccess",
                       "expected `true` or `false`, got " + Got(rv));
              return;
            }
            out_.file.repository_trust_in_danger = Located<bool>{rv.value == "true", Pos(rk, rv)};
          } else {
            Unknown(rk, "repository", RepositoryKeys());
          }
        });
  }

  // Names a repository file may set: each valid, settable, and never a code-loading name.
  void RepositoryEnvSet(const YamlNode& k, const YamlNode& v) {
    NameList(k, v, "repository.envSet", "`envSet: [CI, NODE_ENV]`", EnvUse::kSet,
             out_.file.repository_env_set_where, out_.file.repository_env_set,
             [](const std::string& name) -> std::optional<std::string> {
               auto reason = CodeLoadingEnvReason(name);
               if (!reason) return std::nullopt;
               return *reason +
                      ". Remove it; if sessions need it, set it in this file's own "
                      "`env.set`";
             });
  }

  // A list of variable names (env.pass, repository.envSet): bounded, each valid for `use`,
  // accepted by `also` (nullopt) and listed once.
  template <typename Also>
  void NameList(const YamlNode& k, const YamlNode& v, const std::string& key,
                std::string_view example, EnvUse use, std::optional<std::string>& where,
                std::vector<Located<std::string>>& names, Also also) {
    if (v.kind != Kind::kSequence) {
      AddError(
          At(k, v), key,
          "expected a list of variable names, like " + std::string(example) + ", got " + Got(v));
      return;
    }
    where = Pos(k, v);
    if (v.items.size() > kMaxListEntries) {
      AddError(v, key,
               "has " + std::to_string(v.items.size()) + " entries; at most " +
                   std::to_string(kMaxListEntries) + " are allowed");
      return;
    }
    std::map<std::string, const YamlNode*> seen;
    for (size_t i = 0; i < v.items.size(); ++i) {
      const YamlNode& item = v.items[i];
      const std::string path = key + "[" + std::to_string(i) + "]";
      auto name = StringValue(item, item, path, "a variable name");
      if (!name || !EnvName(item, path, *name, use)) continue;
      if (std::optional<std::string> problem = also(*name)) {
        AddError(item, path, *problem);
        continue;
      }
      auto [it, fresh] = seen.emplace(*name, &item);
      if (!fresh) {
        AddError(item, path,
                 "`" + *name + "` is listed twice (first at line " +
                     std::to_string(it->second->line) + "); keep one");
        continue;
      }
      names.push_back(Located<std::string>{*name, Where(out_.file.path, item.line, item.column)});
    }
  }

  void Env(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "env", "expected a mapping with `pass` and/or `set`, got " + Got(v));
      return;
    }
    out_.file.env_where = Pos(k, v);
    ForEachEntry(v, "env", [&](const std::string& key, const YamlNode& ek, const YamlNode& ev) {
      if (key == "pass") {
        EnvPass(ek, ev);
      } else if (key == "set") {
        EnvSet(ek, ev);
      } else {
        Unknown(ek, "env", EnvKeys());
      }
    });
  }

  void EnvPass(const YamlNode& k, const YamlNode& v) {
    NameList(k, v, "env.pass", "`pass: [PATH, HOME]`", EnvUse::kPass, out_.file.env_pass_where,
             out_.file.env_pass,
             [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
  }

  void EnvSet(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "env.set",
               "expected a mapping of names to strings, like `set: {CI: \"1\"}`, got " + Got(v));
      return;
    }
    out_.file.env_set_where = Pos(k, v);
    if (v.entries.size() > kMaxListEntries) {
      AddError(v, "env.set",
               "has " + std::to_string(v.entries.size()) + " entries; at most " +
                   std::to_string(kMaxListEntries) + " are allowed");
      return;
    }
    ForEachEntry(v, "env.set",
                 [&](const std::string& name, const YamlNode& ek, const YamlNode& ev) {
                   const std::string path = "env.set." + Printable(name);
                   if (!EnvName(ek, path, name, EnvUse::kSet)) return;
                   if (ev.kind != Kind::kScalar) {
                     AddError(At(ek, ev), path,
                              "expected a string value (quote it, e.g. `" + name +
                                  ": \"\"` for empty), got " + Got(ev));
                     return;
                   }
                   if (auto problem = EnvValueProblem(ev.value)) {
                     AddError(ev, path, *problem);
                     return;
                   }
                   out_.file.env_set[name] = Located<std::string>{ev.value, Pos(ek, ev)};
                 });
  }

  void LimitsMap(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "limits",
               "expected a mapping like `limits: {timeoutMs: 60000}`, got " + Got(v));
      return;
    }
    static const std::vector<std::string_view> known = [] {
      std::vector<std::string_view> keys;
      for (const LimitSpec& spec : LimitSpecs()) keys.push_back(spec.key);
      return keys;
    }();
    ForEachEntry(v, "limits", [&](const std::string& key, const YamlNode& lk, const YamlNode& lv) {
      const LimitSpec* spec = FindLimit(key);
      if (spec == nullptr) {
        Unknown(lk, "limits", known);
        return;
      }
      const std::string path = "limits." + key;
      const std::string expected = "expected an integer from " + std::to_string(spec->min) +
                                   " to " + std::to_string(spec->max) + " (" +
                                   std::string(spec->unit) + ")";
      bool overflow = false;
      std::optional<int64_t> number;
      if (lv.kind == Kind::kScalar && lv.plain) number = ParseInteger(lv.value, overflow);
      if (!number || *number < spec->min || *number > spec->max) {
        std::string message = expected + ", got " + Got(lv);
        if (lv.kind == Kind::kScalar && !lv.plain && ParseInteger(lv.value, overflow)) {
          message += "; remove the quotes";
        }
        AddError(At(lk, lv), path, message);
        return;
      }
      out_.file.limits[key] = Located<int64_t>{*number, Pos(lk, lv)};
    });
  }

  // `sessionIds: {first: N, count: M}`: the session uids of a root daemon's sessions.
  void SessionUids(const YamlNode& k, const YamlNode& v) {
    const std::string shape = "a mapping like `sessionIds: {first: 2147418112, count: 65536}`";
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "sessionIds", "expected " + shape + ", got " + Got(v));
      return;
    }
    static const std::vector<std::string_view> known = {"first", "count"};
    const size_t errors_before = out_.errors.size();
    std::optional<int64_t> first;
    std::optional<int64_t> count;
    ForEachEntry(v, "sessionIds",
                 [&](const std::string& key, const YamlNode& ik, const YamlNode& iv) {
                   if (key != "first" && key != "count") {
                     Unknown(ik, "sessionIds", known);
                     return;
                   }
                   const int64_t min = 1;
                   const int64_t max = key == "first" ? 4294967294LL : 1048576;
                   bool overflow = false;
                   std::optional<int64_t> number;
                   if (iv.kind == Kind::kScalar && iv.plain)
                     number = ParseInteger(iv.value, overflow);
                   if (!number || *number < min || *number > max) {
                     AddError(At(ik, iv), "sessionIds." + key,
                              "expected an integer from " + std::to_string(min) + " to " +
                                  std::to_string(max) + " (host ids), got " + Got(iv));
                     return;
                   }
                   (key == "first" ? first : count) = number;
                 });
    if (out_.errors.size() != errors_before) return;
    if (!first || !count) {
      AddError(At(k, v), "sessionIds", "needs both `first` and `count`: " + shape);
      return;
    }
    if (*first + *count - 1 > 4294967294LL) {
      AddError(At(k, v), "sessionIds",
               "the range " + std::to_string(*first) + "+" + std::to_string(*count) +
                   " goes past the largest host id 4294967294; lower `first` or `count`");
      return;
    }
    out_.file.session_uids = Located<SessionUidRange>{
        SessionUidRange{SessionUid(static_cast<uint32_t>(*first)), static_cast<uint32_t>(*count)},
        Pos(k, v)};
  }

  // `audit: {log: PATH, recordDir: DIR, recordMaxBytes: N}`: the audit log and recordings.
  void Audit(const YamlNode& k, const YamlNode& v) {
    if (v.kind != Kind::kMap) {
      AddError(At(k, v), "audit",
               "expected a mapping like `audit: {log: /var/log/ptybox/audit.jsonl, recordDir: "
               "/var/log/ptybox/sessions}`, got " +
                   Got(v));
      return;
    }
    ForEachEntry(v, "audit", [&](const std::string& key, const YamlNode& ak, const YamlNode& av) {
      if (key == "log") {
        if (auto path = PathValue(ak, av, "audit.log")) {
          out_.file.audit_log = Located<fs::path>{*path, Pos(ak, av)};
        }
      } else if (key == "recordDir") {
        if (auto path = PathValue(ak, av, "audit.recordDir")) {
          out_.file.audit_record_dir = Located<fs::path>{*path, Pos(ak, av)};
        }
      } else if (key == "recordMaxBytes") {
        bool overflow = false;
        std::optional<int64_t> number;
        if (av.kind == Kind::kScalar && av.plain) number = ParseInteger(av.value, overflow);
        if (!number || *number < kMinRecordBytes || *number > kMaxRecordBytes) {
          AddError(At(ak, av), "audit.recordMaxBytes",
                   "expected an integer from " + std::to_string(kMinRecordBytes) + " to " +
                       std::to_string(kMaxRecordBytes) + " (bytes), got " + Got(av));
          return;
        }
        out_.file.audit_record_max_bytes = Located<int64_t>{*number, Pos(ak, av)};
      } else {
        Unknown(ak, "audit", AuditKeys());
      }
    });
  }

  fs::path dir_;
  ParsedPolicyFile out_;
};

}  // namespace

std::string Where(const fs::path& file, int line, int column) {
  return file.string() + ":" + std::to_string(line) + ":" + std::to_string(column);
}

PolicyYaml ParsePolicyYaml(std::string_view text) {
  PolicyYaml yaml;
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    yaml.error_key = "file";
    yaml.error = YamlError{
        1, 1,
        "contains a NUL byte at offset " + std::to_string(nul) + "; a policy file is UTF-8 text"};
    return yaml;
  }
  auto tree = ParseBoundedYaml(text);
  if (!tree) {
    yaml.error_key = "yaml";
    yaml.error = std::move(tree.error());
    return yaml;
  }
  yaml.tree = std::move(*tree);
  return yaml;
}

ParsedPolicyFile ParsePolicyYamlFile(const PolicyYaml& yaml, const fs::path& path,
                                     PolicyRole role) {
  return FileParser(path, role).Run(yaml);
}

ParsedPolicyFile ParsePolicyText(std::string_view text, const fs::path& path, PolicyRole role) {
  return ParsePolicyYamlFile(ParsePolicyYaml(text), path, role);
}

}  // namespace ptybox::policy
