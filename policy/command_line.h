// The policy flags of `run`, `serve`, `mcp` and `policy resolve` (--network, --writable, --env,
// --hide) as one more layer between the operator file and the repository file: one table row
// per flag, and one pure function that turns the flags given into a PolicyFile whose values are
// located at "command line --FLAG VALUE". What the layer may change under the operator file is
// policy/layering.h's job (docs/policy.md, "Policy from the command line").
#pragma once

#include <expected>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy_file.h"

namespace ptybox::policy {

// The source `policy resolve` shows for a value of this layer.
inline constexpr std::string_view kCommandLineSource = "command line";

// One policy flag as given: {"--writable", "../cache"}.
struct CommandLineValue {
  std::string flag;
  std::string value;
  bool operator==(const CommandLineValue&) const = default;
};
// Every policy flag of one invocation, in the order given for each flag.
using CommandLinePolicy = std::vector<CommandLineValue>;

// Where a path leads on the host: its canonical form when it is an existing directory, else the
// problem in words that name the path ("/w/cache does not exist"). Injected so the layer is
// built without touching the filesystem in unit tests.
using DirectoryLookup =
    std::function<std::expected<std::filesystem::path, std::string>(const std::filesystem::path&)>;
// The host's: symbolic links and `..` resolved as for a policy file's `writable`.
DirectoryLookup HostDirectories();

struct CommandLineContext {
  // Canonical; a relative --writable or --hide resolves against it (not the current directory).
  std::filesystem::path workspace_root;
  DirectoryLookup directories;
};

// One flag: its name, the name of its value and its help (for --help, the man page test), whether
// it may be given more than once, and how a value enters the layer (its problems into `errors`).
struct CommandLineFlag {
  std::string_view name;        // "--writable"
  std::string_view value_name;  // "DIR"
  std::string_view help;
  bool repeatable = false;
  void (*apply)(const CommandLineValue& given, const CommandLineContext& context,
                ParsedPolicyFile& layer) = nullptr;
};
// Every policy flag, in the order --help lists them.
std::span<const CommandLineFlag> CommandLineFlags();
const CommandLineFlag* FindCommandLineFlag(std::string_view name);

// The layer of `flags`: `path` empty, every value located at "command line --FLAG VALUE" (an
// --env value is never shown: "command line --env NAME"), every `*_where` "command line".
// Problems of a value alone (an unknown word, a reserved name, a directory that does not exist, a
// flag given twice) are kPolicyError in `errors`, each shaped as a file's: "command line --writable
// ../cache: writable: ... ; how to fix". Never touches the filesystem except through `context`.
[[nodiscard]] ParsedPolicyFile BuildCommandLineLayer(const CommandLinePolicy& flags,
                                                     const CommandLineContext& context);

}  // namespace ptybox::policy
