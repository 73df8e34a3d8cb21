// The command line's policy layer: BuildCommandLineLayer() from flags with an injected directory
// lookup (no filesystem), Combine() with it between the operator and the repository file, and
// Resolve() on real files, where relative paths and symbolic links meet the host.
#include "policy/command_line.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "policy/host_pattern.h"
#include "policy/layering.h"
#include "policy/report.h"
#include "policy/resolver.h"
#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;
using testing::Expand;
using testing::TempDir;

// ---- BuildCommandLineLayer: flags -> layer, no filesystem.

class CommandLineLayerTest : public ::testing::Test {
 protected:
  // Directories that "exist": every path under /w and /srv, as themselves; /w/link leads to
  // /srv/out (a symbolic link the lookup resolves, as fs::canonical does).
  ParsedPolicyFile Build(const CommandLinePolicy& flags) {
    CommandLineContext context{
        "/w", [](const fs::path& path) -> std::expected<fs::path, std::string> {
          if (path == "/w/link") return fs::path("/srv/out");
          if (path.string().starts_with("/w") || path.string().starts_with("/srv")) {
            return path;
          }
          return std::unexpected(path.string() + " does not exist");
        }};
    return BuildCommandLineLayer(flags, context);
  }
  std::vector<std::string> Messages(const ParsedPolicyFile& layer) {
    std::vector<std::string> messages;
    for (const Error& error : layer.errors) {
      EXPECT_EQ(error.kind, ErrorKind::kPolicyError) << error.message;
      EXPECT_TRUE(error.context.starts_with("command line")) << error.context;
      messages.push_back(error.message);
    }
    return messages;
  }
};

TEST_F(CommandLineLayerTest, EveryFlagIsOneRowOfTheTable) {
  std::vector<std::string> names;
  for (const CommandLineFlag& flag : CommandLineFlags()) {
    names.emplace_back(flag.name);
    EXPECT_TRUE(flag.name.starts_with("--"));
    EXPECT_FALSE(flag.help.empty());
    EXPECT_NE(flag.apply, nullptr);
    EXPECT_EQ(FindCommandLineFlag(flag.name), &flag);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"--network", "--allow-host", "--writable", "--env",
                                             "--hide"}));
  EXPECT_EQ(FindCommandLineFlag("--mode"), nullptr);
}

// The next flag is one row: it fails here until the man page and docs/policy.md describe it.
TEST_F(CommandLineLayerTest, EveryFlagIsInTheManPageAndThePolicyDoc) {
  auto read = [](const fs::path& path) {
    std::ifstream in(fs::path(PTYBOX_SOURCE_DIR) / path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string man = read("packaging/ptybox.1");
  const std::string doc = read("docs/policy.md");
  ASSERT_FALSE(man.empty());
  ASSERT_FALSE(doc.empty());
  for (const CommandLineFlag& flag : CommandLineFlags()) {
    std::string roff;
    for (char c : flag.name) roff += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(man.find(roff + " "), std::string::npos) << flag.name << " in packaging/ptybox.1";
    EXPECT_NE(doc.find("| `" + std::string(flag.name) + " "), std::string::npos)
        << flag.name << " in the table of docs/policy.md, \"Policy from the command line\"";
  }
}

TEST_F(CommandLineLayerTest, NoFlagsIsAnEmptyLayer) {
  ParsedPolicyFile layer = Build({});
  EXPECT_TRUE(layer.errors.empty());
  EXPECT_FALSE(layer.file.network_allowed);
  EXPECT_FALSE(layer.file.writable_where);
  EXPECT_FALSE(layer.file.env_where);
  EXPECT_FALSE(layer.file.hide_where);
}

TEST_F(CommandLineLayerTest, NetworkTakesTheWordOnce) {
  ParsedPolicyFile allow = Build({{"--network", "allow"}});
  ASSERT_TRUE(allow.errors.empty());
  ASSERT_TRUE(allow.file.network_allowed);
  EXPECT_TRUE(allow.file.network_allowed->value);
  EXPECT_EQ(allow.file.network_allowed->where, "command line --network allow");
  ParsedPolicyFile deny = Build({{"--network", "deny"}});
  ASSERT_TRUE(deny.file.network_allowed);
  EXPECT_FALSE(deny.file.network_allowed->value);

  EXPECT_EQ(Messages(Build({{"--network", "alow"}})),
            std::vector<std::string>{"command line --network alow: network: expected `deny` or "
                                     "`allow`, got `alow`; did you mean `allow`?"});
  EXPECT_EQ(Messages(Build({{"--network", "true"}})),
            std::vector<std::string>{"command line --network true: network: expected `deny` or "
                                     "`allow`, got `true`; write --network allow or --network "
                                     "deny"});
  EXPECT_EQ(Messages(Build({{"--network", "allow"}, {"--network", "deny"}})),
            std::vector<std::string>{"command line --network deny: network: --network is given "
                                     "more than once (first as `command line --network allow`); "
                                     "give it once"});
}

TEST_F(CommandLineLayerTest, WritableResolvesAgainstTheWorkspaceAndFollowsLinks) {
  ParsedPolicyFile layer = Build({{"--writable", "build"},
                                  {"--writable", "../srv/cache"},
                                  {"--writable", "/srv/abs/"},
                                  {"--writable", "link"},
                                  {"--writable", "./build/../build"}});
  ASSERT_TRUE(layer.errors.empty()) << layer.errors.front().message;
  ASSERT_EQ(layer.file.writable.size(), 4u) << "the same directory twice is kept once";
  EXPECT_EQ(layer.file.writable[0].value, "/w/build");
  EXPECT_EQ(layer.file.writable[0].where, "command line --writable build");
  EXPECT_EQ(layer.file.writable[1].value, "/srv/cache");
  EXPECT_EQ(layer.file.writable[1].where, "command line --writable ../srv/cache");
  EXPECT_EQ(layer.file.writable[2].value, "/srv/abs/");
  EXPECT_EQ(layer.file.writable[3].value, "/srv/out") << "where the link leads, not the link";
  EXPECT_EQ(layer.file.writable_where, "command line");

  EXPECT_EQ(Messages(Build({{"--writable", "../cache"}, {"--writable", ""}})),
            (std::vector<std::string>{
                "command line --writable ../cache: writable: /cache does not exist; create the "
                "directory or drop the flag",
                "command line --writable : writable: expected a path of 1 to 4096 bytes; give a "
                "directory (a relative path starts at the workspace root)"}));
}

TEST_F(CommandLineLayerTest, EnvPassesOrSetsAndNeverShowsAValue) {
  ParsedPolicyFile layer =
      Build({{"--env", "GIT_AUTHOR_NAME"}, {"--env", "TOKEN=s3cr3t=x"}, {"--env", "EMPTY="}});
  ASSERT_TRUE(layer.errors.empty()) << layer.errors.front().message;
  ASSERT_EQ(layer.file.env_pass.size(), 1u);
  EXPECT_EQ(layer.file.env_pass[0].value, "GIT_AUTHOR_NAME");
  EXPECT_EQ(layer.file.env_pass[0].where, "command line --env GIT_AUTHOR_NAME");
  ASSERT_EQ(layer.file.env_set.size(), 2u);
  EXPECT_EQ(layer.file.env_set.at("TOKEN").value, "s3cr3t=x") << "split at the first `=`";
  EXPECT_EQ(layer.file.env_set.at("TOKEN").where, "command line --env TOKEN");
  EXPECT_EQ(layer.file.env_set.at("EMPTY").value, "");
  EXPECT_EQ(layer.file.env_where, "command line");

  const std::vector<std::string> messages =
      Messages(Build({{"--env", "PS1=s3cr3t"},
                      {"--env", "PROMPT_COMMAND"},
                      {"--env", "s3cr3t-value"},
                      {"--env", "TOKEN=s3cr3t"},
                      {"--env", "TOKEN=s3cr3t"},
                      {"--env", "BIG=" + std::string(kMaxEnvValueBytes + 1, 'x')}}));
  ASSERT_EQ(messages.size(), 5u);
  EXPECT_TRUE(messages[0].starts_with("command line --env PS1: env.set: `PS1` is reserved: "))
      << messages[0];
  EXPECT_TRUE(messages[1].starts_with(
      "command line --env PROMPT_COMMAND: env.pass: `PROMPT_COMMAND` is reserved: "))
      << messages[1];
  EXPECT_TRUE(messages[2].starts_with(
      "command line --env: env.pass: the name before `=` is not a valid variable name (it is "
      "not shown, in case it is a value)"))
      << messages[2];
  EXPECT_EQ(messages[3],
            "command line --env TOKEN: env.set: `TOKEN` is given more than once; give --env "
            "TOKEN once");
  EXPECT_EQ(messages[4],
            "command line --env BIG: env.set: the value has 32769 bytes; at most 32768 are "
            "allowed");
  for (const std::string& message : messages) {
    EXPECT_EQ(message.find("s3cr3t"), std::string::npos) << "a value was echoed: " << message;
    EXPECT_EQ(message.find("xxxx"), std::string::npos) << "a value was echoed: " << message;
  }
}

TEST_F(CommandLineLayerTest, RepeatedFlagsAreBoundedAsAFilesListsAre) {
  CommandLinePolicy flags;
  for (size_t i = 0; i <= kMaxListEntries; ++i) {
    flags.push_back({"--env", "V" + std::to_string(i) + "=s3cr3t"});
    flags.push_back({"--writable", "d" + std::to_string(i)});
  }
  const std::vector<std::string> messages = Messages(Build(flags));
  EXPECT_EQ(messages,
            (std::vector<std::string>{
                "command line --env V256: env: more than 256 --env flags; at most 256 are allowed "
                "(list them in a policy file's `env` instead)",
                "command line --writable d256: writable: more than 256 --writable flags; at most "
                "256 are allowed (list them in a policy file's `writable` instead)"}));
}

TEST_F(CommandLineLayerTest, HideResolvesAgainstTheWorkspaceOrEveryHome) {
  ParsedPolicyFile layer = Build({{"--hide", ".env"},
                                  {"--hide", "~/.aws/../.aws"},
                                  {"--hide", "/srv/secret"},
                                  {"--hide", "/w/.env"}});
  ASSERT_TRUE(layer.errors.empty()) << layer.errors.front().message;
  ASSERT_EQ(layer.file.hide.size(), 3u);
  EXPECT_EQ(layer.file.hide[0].value, "/w/.env");
  EXPECT_EQ(layer.file.hide[1].value, "~/.aws");
  EXPECT_EQ(layer.file.hide[2].value, "/srv/secret");
  EXPECT_EQ(layer.file.hide_where, "command line");

  const std::vector<std::string> messages =
      Messages(Build({{"--hide", "~root/.ssh"}, {"--hide", "/usr"}}));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0],
            "command line --hide ~root/.ssh: hide: `~` must be followed by `/` and a path inside "
            "the home directory, like `~/.ssh` (it stands for every home directory)");
  EXPECT_TRUE(messages[1].starts_with("command line --hide /usr: hide: ")) << messages[1];
}

TEST_F(CommandLineLayerTest, AnUnknownFlagIsAnError) {
  EXPECT_EQ(Messages(Build({{"--mode", "danger-full-access"}})),
            std::vector<std::string>{"command line --mode: flag: not a policy flag; the policy "
                                     "flags are --network, --allow-host, --writable, --env and "
                                     "--hide"});
}

TEST_F(CommandLineLayerTest, AllowHostTakesPatternsAndNeverJoinsNetwork) {
  ParsedPolicyFile layer =
      Build({{"--allow-host", "registry.npmjs.org"}, {"--allow-host", "*.example.org:8443"}});
  ASSERT_TRUE(layer.errors.empty());
  ASSERT_TRUE(layer.file.network_names.has_value());
  ASSERT_TRUE(layer.file.network_names->value.allow.has_value());
  ASSERT_EQ(layer.file.network_names->value.allow->size(), 2u);
  EXPECT_EQ(layer.file.network_names->value.allow->at(1).where,
            "command line --allow-host *.example.org:8443");
  std::vector<std::string> bad = Messages(Build({{"--allow-host", "exa mple.org"}}));
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_TRUE(bad[0].starts_with("command line --allow-host exa mple.org: network.allow: "))
      << bad[0];
  EXPECT_NE(bad[0].find("write a host name such as"), std::string::npos) << bad[0];
  EXPECT_EQ(Messages(Build({{"--network", "allow"}, {"--allow-host", "a.example.org"}})),
            std::vector<std::string>{
                "command line --allow-host a.example.org: network: --network and --allow-host "
                "cannot be combined (first: `command line --network allow`): --allow-host "
                "already limits the network to the names given; give one of them"});
}

// ---- Combine: the layer between the operator file and the repository file.

Located<bool> At(bool value, std::string where) { return {value, std::move(where)}; }

class CommandLineLayeringTest : public ::testing::Test {
 protected:
  CommandLineLayeringTest() {
    op_.path = "/etc/op.yaml";
    repo_.path = "/w/.ptybox.yaml";
    repo_.role = PolicyRole::kRepository;
  }
  ParsedPolicyFile Layer(const CommandLinePolicy& flags) {
    CommandLineContext context{"/w", [](const fs::path& path) { return path; }};
    ParsedPolicyFile layer = BuildCommandLineLayer(flags, context);
    EXPECT_TRUE(layer.errors.empty());
    return layer;
  }
  std::expected<ResolvedPolicy, std::vector<Error>> Combined(const CommandLinePolicy& flags,
                                                             bool with_operator = true,
                                                             bool with_repository = false) {
    cli_ = Layer(flags).file;
    LayerInputs inputs{with_operator ? &op_ : nullptr,
                       with_repository ? &repo_ : nullptr,
                       "/w",
                       "command line",
                       std::nullopt,
                       &cli_};
    return Combine(inputs);
  }
  std::string FirstDenial(const CommandLinePolicy& flags, bool with_operator = true,
                          bool with_repository = false) {
    auto combined = Combined(flags, with_operator, with_repository);
    if (combined) return "(allowed)";
    EXPECT_EQ(combined.error().front().kind, ErrorKind::kPolicyDenied);
    return combined.error().front().message;
  }

  // `network: {allow: [PATTERN]}` as a file would locate it (the list at `where`, the entry
  // 8 columns on).
  static Located<PolicyFile::NetworkLists> AllowList(std::string_view pattern,
                                                     const std::string& file, int line) {
    auto parsed = ParseHostPattern(pattern);
    EXPECT_TRUE(parsed.has_value()) << pattern;
    PolicyFile::NetworkLists lists;
    const std::string at = file + ":" + std::to_string(line);
    lists.allow = std::vector<NetworkRule>{NetworkRule{parsed.value_or(HostPattern{}), at + ":18"}};
    return Located<PolicyFile::NetworkLists>{std::move(lists), at + ":10"};
  }

  PolicyFile op_;
  PolicyFile repo_;
  PolicyFile cli_;
};

TEST_F(CommandLineLayeringTest, NetworkAllowNeedsAnOperatorThatDoesNotDenyIt) {
  // No operator file: the built-in ceiling is danger-full-access, where a client may ask for the
  // host's network anyway.
  auto open = Combined({{"--network", "allow"}}, /*with_operator=*/false);
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(open->network_allowed);
  EXPECT_EQ(open->sources.at("network"), "command line");

  op_.network_allowed = At(false, "/etc/op.yaml:2:10");
  EXPECT_EQ(FirstDenial({{"--network", "allow"}}),
            "command line --network allow: network: `allow` is not permitted: the operator "
            "denies network (/etc/op.yaml:2:10); the command line may only narrow what the "
            "operator policy allows. Drop --network allow, or ask the operator to allow network "
            "in /etc/op.yaml");

  op_.network_allowed.reset();
  op_.ceiling = Located<Mode>{Mode::kWorkspaceWrite, "/etc/op.yaml:3:10"};
  EXPECT_EQ(FirstDenial({{"--network", "allow"}}),
            "command line --network allow: network: `allow` is not permitted: the operator's "
            "ceiling `workspace-write` (/etc/op.yaml:3:10) confines sessions and the operator "
            "policy does not allow network; the command line may allow it only where the "
            "operator policy says `network: allow` or keeps the ceiling `danger-full-access`. "
            "Drop --network allow, or ask the operator to set `network: allow` in /etc/op.yaml");

  op_.network_allowed = At(true, "/etc/op.yaml:2:10");
  auto allowed = Combined({{"--network", "allow"}});
  ASSERT_TRUE(allowed.has_value());
  EXPECT_TRUE(allowed->network_allowed);
  auto narrowed = Combined({{"--network", "deny"}});
  ASSERT_TRUE(narrowed.has_value());
  EXPECT_FALSE(narrowed->network_allowed);
  EXPECT_EQ(narrowed->sources.at("network"), "command line");
}

// Under the operator's list of names, --network allow would widen it; --network deny narrows
// it to nothing.
TEST_F(CommandLineLayeringTest, UnderTheOperatorsNamesNetworkAllowIsRefusedAndDenyTakesThemAway) {
  op_.network_names = AllowList("registry.npmjs.org", "/etc/op.yaml", 2);
  EXPECT_EQ(FirstDenial({{"--network", "allow"}}),
            "command line --network allow: network: `allow` is not permitted: the operator "
            "allows only the names listed at /etc/op.yaml:2:10; the command line may only "
            "narrow what the operator policy allows. Drop --network allow, or ask the operator "
            "to change /etc/op.yaml");
  auto denied = Combined({{"--network", "deny"}});
  ASSERT_TRUE(denied.has_value());
  EXPECT_FALSE(denied->network_allowed);
  EXPECT_FALSE(denied->network_names.has_value()) << "--network deny left the names reachable";
  EXPECT_EQ(denied->sources.at("network"), "command line");
  auto listed = Combined({});
  ASSERT_TRUE(listed.has_value());
  ASSERT_TRUE(listed->network_names.has_value());
  EXPECT_EQ(listed->network_names->allow.size(), 1u);
}

// --allow-host narrows: to the names given where --network allow would be permitted, within
// the operator's list where it has one, and not at all under an operator's network: deny.
TEST_F(CommandLineLayeringTest, AllowHostNarrowsWithinWhatTheOperatorAllows) {
  auto open = Combined({{"--allow-host", "registry.npmjs.org"}}, /*with_operator=*/false);
  ASSERT_TRUE(open.has_value());
  EXPECT_FALSE(open->network_allowed) << "names are not the host's network";
  ASSERT_TRUE(open->network_names.has_value());
  ASSERT_EQ(open->network_names->allow.size(), 1u);
  EXPECT_EQ(ToString(open->network_names->allow[0].pattern), "registry.npmjs.org");

  op_.network_allowed = At(false, "/etc/op.yaml:2:10");
  EXPECT_EQ(FirstDenial({{"--allow-host", "registry.npmjs.org"}}),
            "command line --allow-host registry.npmjs.org: network.allow: `registry.npmjs.org` "
            "is not permitted: the operator denies network (/etc/op.yaml:2:10); the command "
            "line may deny network but never allow a name. Drop --allow-host "
            "registry.npmjs.org, or ask the operator to allow it in /etc/op.yaml");

  op_.network_allowed.reset();
  op_.network_names = AllowList("*.example.org", "/etc/op.yaml", 2);
  auto within = Combined({{"--allow-host", "git.example.org"}});
  ASSERT_TRUE(within.has_value());
  ASSERT_TRUE(within->network_names.has_value());
  ASSERT_EQ(within->network_names->allow.size(), 1u);
  EXPECT_EQ(ToString(within->network_names->allow[0].pattern), "git.example.org");
  const std::string outside = FirstDenial({{"--allow-host", "registry.npmjs.org"}});
  EXPECT_TRUE(
      outside.starts_with("command line --allow-host registry.npmjs.org: network.allow: "
                          "`registry.npmjs.org` is not permitted: it is not within the "
                          "operator's allow list"))
      << outside;
  EXPECT_NE(outside.find("Drop --allow-host registry.npmjs.org"), std::string::npos) << outside;
}

// Under --network deny a repository's list of names is refused naming the flag, not an
// operator that said nothing.
TEST_F(CommandLineLayeringTest, ARepositorysNamesUnderNetworkDenyNameTheCommandLine) {
  repo_.network_names = AllowList("registry.npmjs.org", "/w/.ptybox.yaml", 2);
  EXPECT_EQ(FirstDenial({{"--network", "deny"}}, /*with_operator=*/false, /*with_repository=*/true),
            "/w/.ptybox.yaml:2:18: network.allow: `registry.npmjs.org` is not permitted: the "
            "command line denies network (command line --network deny); a repository policy may "
            "deny network but never allow a name. Remove it from /w/.ptybox.yaml, or ask the "
            "operator to allow it");
}

TEST_F(CommandLineLayeringTest, TheRepositoryMayNarrowTheCommandLineButNotWidenIt) {
  op_.network_allowed = At(true, "/etc/op.yaml:2:10");
  repo_.network_allowed = At(true, "/w/.ptybox.yaml:2:10");
  EXPECT_EQ(FirstDenial({{"--network", "deny"}}, true, /*with_repository=*/true),
            "/w/.ptybox.yaml:2:10: network: `allow` is not permitted: the command line denies "
            "network (command line --network deny); a repository policy may deny network but "
            "never allow it. Remove `network: allow` from /w/.ptybox.yaml, or ask the operator "
            "to allow network");
  repo_.network_allowed = At(false, "/w/.ptybox.yaml:2:10");
  auto narrowed = Combined({{"--network", "allow"}}, true, true);
  ASSERT_TRUE(narrowed.has_value());
  EXPECT_FALSE(narrowed->network_allowed);
  EXPECT_EQ(narrowed->sources.at("network"), "/w/.ptybox.yaml:2:10");
}

TEST_F(CommandLineLayeringTest, WritableStaysWithinWhatTheOperatorGrantsUnderALowerCeiling) {
  op_.ceiling = Located<Mode>{Mode::kWorkspaceWrite, "/etc/op.yaml:3:10"};
  op_.writable_where = "/etc/op.yaml:4:1";
  op_.writable = {Located<fs::path>{"/srv/cache", "/etc/op.yaml:4:12"}};
  auto inside = Combined({{"--writable", "build"}, {"--writable", "/srv/cache/ccache"}});
  ASSERT_TRUE(inside.has_value()) << inside.error().front().message;
  EXPECT_EQ(inside->writable_roots,
            (std::vector<fs::path>{"/srv/cache", "/w/build", "/srv/cache/ccache"}));
  EXPECT_EQ(inside->sources.at("writable"), "/etc/op.yaml:4:1, command line");

  EXPECT_EQ(FirstDenial({{"--writable", "../elsewhere"}}),
            "command line --writable ../elsewhere: writable: /elsewhere is outside the "
            "workspace and the operator's writable roots (/w, /srv/cache; symbolic links and "
            "`..` resolved), and the operator's ceiling `workspace-write` (/etc/op.yaml:3:10) "
            "keeps the command line within them. Name a directory inside them, or ask the "
            "operator to list it under `writable` in /etc/op.yaml");

  // Under the ceiling danger-full-access (a client may ask for every directory) any directory.
  op_.ceiling.reset();
  auto anywhere = Combined({{"--writable", "../elsewhere"}});
  ASSERT_TRUE(anywhere.has_value());
  EXPECT_EQ(anywhere->writable_roots, (std::vector<fs::path>{"/srv/cache", "/elsewhere"}));
}

TEST_F(CommandLineLayeringTest, EnvAddsToTheOperatorsAndTheRepositoryCannotChangeIt) {
  op_.env_where = op_.env_set_where = "/etc/op.yaml:2:1";
  op_.env_set["HTTP_PROXY"] = Located<std::string>{"http://proxy:3128", "/etc/op.yaml:3:21"};
  EXPECT_EQ(FirstDenial({{"--env", "HTTP_PROXY=s3cr3t"}}),
            "command line --env HTTP_PROXY: env.set.HTTP_PROXY: the operator policy sets "
            "`HTTP_PROXY` (/etc/op.yaml:3:21); the command line may add variables but not change "
            "the operator's. Drop --env HTTP_PROXY");
  EXPECT_EQ(FirstDenial({{"--env", "HTTP_PROXY"}}),
            "command line --env HTTP_PROXY: env.pass: the operator policy sets `HTTP_PROXY` "
            "(/etc/op.yaml:3:21); the command line may add variables but not change the "
            "operator's. Drop --env HTTP_PROXY");

  auto added = Combined({{"--env", "GIT_AUTHOR_NAME"}, {"--env", "LD_LIBRARY_PATH=/opt/lib"}});
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->env.pass.back(), "GIT_AUTHOR_NAME");
  EXPECT_EQ(added->env.set, (std::map<std::string, std::string>{{"HTTP_PROXY", "http://proxy:3128"},
                                                                {"LD_LIBRARY_PATH", "/opt/lib"}}));
  EXPECT_EQ(added->sources.at("env.pass"), "default, command line");
  EXPECT_EQ(added->sources.at("env.set"), "/etc/op.yaml:2:1, command line");
  EXPECT_EQ(added->sources.at("env"), "/etc/op.yaml:2:1, command line");

  // The repository may pass what the command line passes, never change what it sets.
  repo_.env_where = repo_.env_pass_where = repo_.env_set_where = "/w/.ptybox.yaml:2:1";
  repo_.env_pass = {Located<std::string>{"GIT_AUTHOR_NAME", "/w/.ptybox.yaml:3:10"}};
  repo_.env_set["CI"] = Located<std::string>{"0", "/w/.ptybox.yaml:4:10"};
  auto narrowed = Combined({{"--env", "GIT_AUTHOR_NAME"}, {"--env", "CI=1"}}, true, true);
  ASSERT_FALSE(narrowed.has_value());
  EXPECT_EQ(narrowed.error().front().message,
            "/w/.ptybox.yaml:4:10: env.set.CI: the command line sets `CI` (command line --env "
            "CI); a repository policy may add variables but not change those of whoever started "
            "ptybox. Remove it");
  repo_.env_set.clear();
  auto passes = Combined({{"--env", "GIT_AUTHOR_NAME"}}, true, true);
  ASSERT_TRUE(passes.has_value()) << passes.error().front().message;
  EXPECT_EQ(passes->env.pass, std::vector<std::string>{"GIT_AUTHOR_NAME"});
}

TEST_F(CommandLineLayeringTest, HideAddsBetweenTheOperatorsAndTheRepositorys) {
  op_.hide_where = "/etc/op.yaml:2:1";
  op_.hide = {Located<std::string>{"~/.ssh", "/etc/op.yaml:2:8"}};
  repo_.hide_where = "/w/.ptybox.yaml:2:1";
  repo_.hide = {Located<std::string>{"/w/.env", "/w/.ptybox.yaml:2:8"}};
  auto combined = Combined({{"--hide", "/srv/secret"}, {"--hide", ".env"}}, true, true);
  ASSERT_TRUE(combined.has_value());
  EXPECT_EQ(combined->hidden, (std::vector<std::string>{"~/.ssh", "/srv/secret", "/w/.env"}));
  EXPECT_EQ(combined->sources.at("hide"), "/etc/op.yaml:2:1, command line, /w/.ptybox.yaml:2:1");
}

// ---- Resolve: real files, relative paths against the workspace, links canonicalised.

class CommandLineResolveTest : public ::testing::Test {
 protected:
  CommandLineResolveTest() : ws_(dir_.Dir("ws")) {
    inputs_.default_operator_policy = dir_.path() / "etc/policy.yaml";
    inputs_.workspace = ws_;
  }
  fs::path Operator(const std::string& text) {
    return dir_.File("etc/policy.yaml", Expand(text, dir_.path()));
  }
  std::string Problem(ErrorKind kind) {
    auto resolved = Resolve(inputs_);
    if (resolved) return "(resolved)";
    EXPECT_EQ(resolved.error().kind, kind);
    return resolved.error().message;
  }

  TempDir dir_;
  fs::path ws_;
  ResolveInputs inputs_;
};

TEST_F(CommandLineResolveTest, RelativeWritableStartsAtTheWorkspaceAndALinkCannotEscape) {
  dir_.Dir("cache");
  dir_.Dir("ws/build");
  fs::create_symlink(dir_.path() / "cache", ws_ / "escape");
  Operator("version: 1\nceiling: workspace-write\n");
  inputs_.command_line = {{"--writable", "build"}, {"--writable", "escape"}};
  EXPECT_EQ(Problem(ErrorKind::kPolicyDenied),
            Expand("command line --writable escape: writable: {dir}/cache is outside the "
                   "workspace and the operator's writable roots ({dir}/ws; symbolic links and "
                   "`..` resolved), and the operator's ceiling `workspace-write` "
                   "({dir}/etc/policy.yaml:2:10) keeps the command line within them. Name a "
                   "directory inside them, or ask the operator to list it under `writable` in "
                   "{dir}/etc/policy.yaml",
                   dir_.path()));
  inputs_.command_line = {{"--writable", "../cache"}};
  EXPECT_TRUE(Problem(ErrorKind::kPolicyDenied).starts_with("command line --writable ../cache: "));

  Operator("version: 1\nceiling: workspace-write\nwritable: [../cache]\n");
  inputs_.command_line = {{"--writable", "build"}, {"--writable", "../cache"}};
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->writable_roots,
            (std::vector<fs::path>{dir_.path() / "cache", ws_ / "build"}));

  inputs_.command_line = {{"--writable", "missing"}};
  EXPECT_EQ(Problem(ErrorKind::kPolicyError),
            Expand("command line --writable missing: writable: {dir}/ws/missing does not exist; "
                   "create the directory or drop the flag",
                   dir_.path()));
}

TEST_F(CommandLineResolveTest, PolicyResolveShowsTheCommandLineAsTheSource) {
  dir_.Dir("ws/build");
  Operator("version: 1\nnetwork: allow\n");
  inputs_.command_line = {
      {"--network", "deny"}, {"--writable", "build"}, {"--hide", "secret.txt"}, {"--env", "CI=1"}};
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  const std::string text = FormatResolved(*resolved);
  EXPECT_NE(text.find("network: deny  # command line\n"), std::string::npos) << text;
  EXPECT_NE(text.find(Expand("writable: [{dir}/ws/build]  # command line\n", dir_.path())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(Expand("{dir}/ws/secret.txt]  # default, command line\n", dir_.path())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("env.set: {CI: \"1\"}  # command line\n"), std::string::npos) << text;
  EXPECT_NE(text.find(Expand("policy files: [{dir}/etc/policy.yaml]\n", dir_.path())),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ptybox::policy
