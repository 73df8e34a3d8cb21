// ptybox: persistent, sandboxed, interactive shells for AI agents and CI jobs.
//   ptybox serve [--stdio | --socket PATH] [--max-connections N] [--max-sessions N]
//                [--workspace DIR] [--policy FILE] [POLICY FLAGS] [--audit-log FILE] [--record DIR]
//   ptybox mcp [--workspace DIR] [--policy FILE] [POLICY FLAGS] [--mode MODE]
//              [--consent-timeout SECONDS] [--max-result-bytes N]
//              [--audit-log FILE] [--record DIR]
//   ptybox run [--workspace DIR] [--policy FILE] [POLICY FLAGS] [--mode MODE] [--timeout SECONDS]
//              [--audit-log FILE] -- CMD [ARG...]
//   ptybox policy check [FILE...] |
//   ptybox policy resolve [--workspace DIR] [--policy FILE] [POLICY FLAGS]
// POLICY FLAGS: [--network allow|deny] [--writable DIR]... [--env NAME[=VALUE]]... [--hide PATH]...
// (policy/command_line.h)
//   ptybox doctor
//   ptybox demo [--workspace DIR] [--policy FILE]
//   ptybox ls [--socket PATH] [--token-file FILE | --workspace DIR] [--json]
//   ptybox attach [--socket PATH] [--token-file FILE | --workspace DIR] [--write] SESSION
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/log.h"
#include "policy/mode.h"
#include "policy/mode_names.h"
#include "policy/resolver.h"
#include "runtime/audit/audit_log.h"
#include "runtime/cli/attach_command.h"
#include "runtime/cli/demo.h"
#include "runtime/cli/doctor.h"
#include "runtime/cli/policy_command.h"
#include "runtime/cli/run_command.h"
#include "runtime/daemon.h"
#include "runtime/mcp/mcp_budget.h"
#include "sandbox/host_probe.h"

namespace {

constexpr const char* kVersion = "0.1.0";

// --network, --writable, --env, --hide: one option per row of policy/command_line.h's table,
// each occurrence taking one value.
struct PolicyFlags {
  std::vector<std::vector<std::string>> values =
      std::vector<std::vector<std::string>>(ptybox::policy::CommandLineFlags().size());

  [[nodiscard]] ptybox::policy::CommandLinePolicy Given() const {
    ptybox::policy::CommandLinePolicy given;
    const auto specs = ptybox::policy::CommandLineFlags();
    for (size_t i = 0; i < specs.size(); ++i) {
      for (const std::string& value : values[i]) {
        given.push_back({std::string(specs[i].name), value});
      }
    }
    return given;
  }
};

struct CommonFlags {
  std::string workspace;
  std::string policy;
  PolicyFlags policy_flags;
};

// `policy_flags`: whether the command takes --network, --writable, --env and --hide.
void AddCommonFlags(CLI::App* app, CommonFlags& flags, bool policy_flags = true) {
  app->add_option("--workspace", flags.workspace,
                  "workspace root (default: the current directory)");
  app->add_option("--policy", flags.policy,
                  std::string("operator policy file (default: ") +
                      ptybox::policy::kDefaultOperatorPolicy + " when present)");
  if (!policy_flags) return;
  const auto specs = ptybox::policy::CommandLineFlags();
  for (size_t i = 0; i < specs.size(); ++i) {
    CLI::Option* option = app->add_option(std::string(specs[i].name), flags.policy_flags.values[i],
                                          std::string(specs[i].help))
                              ->type_name(std::string(specs[i].value_name))
                              ->allow_extra_args(false);
    // A flag given once still keeps every occurrence: the layer says which was given twice.
    if (!specs[i].repeatable) {
      option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
}

ptybox::runtime::ServiceOptions ServiceFrom(const CommonFlags& flags) {
  ptybox::runtime::ServiceOptions o;
  std::error_code ec;
  if (!flags.workspace.empty()) {
    o.workspace = std::filesystem::absolute(flags.workspace, ec);
    o.workspace_from_cli = true;
  } else {
    o.workspace = std::filesystem::current_path(ec);
  }
  if (!flags.policy.empty()) o.operator_policy = std::filesystem::absolute(flags.policy, ec);
  o.command_line = flags.policy_flags.Given();
  if (const char* path = std::getenv("PTYBOX_OPERATOR_POLICY"); path != nullptr && *path) {
    o.default_operator_policy = path;
  }
  o.shell.init_binary = ptybox::runtime::FindInitBinary();
  o.shell.bwrap = ptybox::sandbox::FindBwrap();
  return o;
}

// --audit-log FILE (serve, mcp, run) and --record DIR (serve, mcp): docs/security.md.
struct AuditFlags {
  std::string log;
  std::string record;
};

void AddAuditFlags(CLI::App* app, AuditFlags& flags, bool record) {
  app->add_option("--audit-log", flags.log,
                  "append one JSON line per event to FILE (created 0600; never a symlink); "
                  "overrides the operator policy's audit.log");
  if (record) {
    app->add_option("--record", flags.record,
                    "record each session as DIR/<sessionId>.cast (asciicast v2, for `asciinema "
                    "play`); overrides the operator policy's audit.recordDir");
  }
}

// The audit sink of a daemon (or nullptr), from the flags and the operator policy, its files
// opened now and reached only by descriptor afterwards. The log file and the recordings'
// directory are hidden inside confined sessions, as the socket is (docs/security.md, "Audit log
// and recordings"). Nullopt, after saying why on stderr, when they cannot be used: the caller
// exits.
std::optional<std::shared_ptr<ptybox::runtime::AuditLog>> AuditFrom(
    const AuditFlags& flags, ptybox::runtime::ServiceOptions& service, const char* program) {
  std::optional<std::filesystem::path> log;
  std::optional<std::filesystem::path> record;
  if (!flags.log.empty()) log = flags.log;
  if (!flags.record.empty()) record = flags.record;
  const ptybox::policy::ResolveInputs inputs =
      ptybox::runtime::ResolveInputsFrom(service, std::nullopt);
  std::optional<ptybox::runtime::AuditOptions> options =
      ptybox::runtime::AuditOptionsFrom(log, record, inputs, program);
  if (!options) return std::shared_ptr<ptybox::runtime::AuditLog>();
  // The roots sessions get, as far as they are known now (a policy edited later may add one:
  // docs/security.md).
  std::vector<std::filesystem::path> roots = {service.workspace};
  if (ptybox::Result<ptybox::policy::ResolvedPolicy> resolved = ptybox::policy::Resolve(inputs)) {
    roots.push_back(resolved->workspace_root);
    roots.insert(roots.end(), resolved->writable_roots.begin(), resolved->writable_roots.end());
  }
  ptybox::Result<std::shared_ptr<ptybox::runtime::AuditLog>> audit =
      ptybox::runtime::StartAudit(std::move(*options), roots);
  if (!audit) {
    std::cerr << "ptybox " << program << ": " << audit.error().message << "\n";
    return std::nullopt;
  }
  // By descriptor: wherever a renamed parent moved them, they stay hidden.
  for (const std::filesystem::path& held : (*audit)->HeldPaths()) {
    service.shell.daemon_files.push_back(held);
  }
  return *audit;
}

// The policy flags of serve and mcp, checked once at startup: a flag with a wrong value or one
// the operator policy refuses ends the daemon now (exit 2) rather than refusing every session
// later. Any other policy problem (a broken file) is reported at each spawn, as without flags.
bool PolicyFlagsUsable(const ptybox::runtime::ServiceOptions& service, const char* program) {
  if (service.command_line.empty()) return true;
  ptybox::Result<ptybox::policy::ResolvedPolicy> resolved =
      ptybox::policy::Resolve(ptybox::runtime::ResolveInputsFrom(service, service.mode_override));
  if (resolved || !resolved.error().context.starts_with(ptybox::policy::kCommandLineSource)) {
    return true;
  }
  std::cerr << "ptybox " << program << ": " << resolved.error().Describe() << "\n";
  return false;
}

// serve and mcp: the daemon with its audit log and recordings, or exit 1 when they cannot be
// used (AuditFrom said why).
int RunDaemonWithAudit(ptybox::runtime::DaemonOptions options, const AuditFlags& audit,
                       const char* program) {
  if (!PolicyFlagsUsable(options.service, program)) return 2;
  std::optional<std::shared_ptr<ptybox::runtime::AuditLog>> log =
      AuditFrom(audit, options.service, program);
  if (!log) return 1;
  options.service.audit = *log;
  return ptybox::runtime::RunDaemon(std::move(options));
}

// `ptybox mcp --mode MODE`: the mode the model starts in, which must be within the ceiling.
// Returns the exit code of a startup error, or nullopt to go on.
std::optional<int> SetMcpStartMode(const std::string& text,
                                   ptybox::runtime::ServiceOptions& service) {
  std::optional<ptybox::policy::Mode> mode = ptybox::policy::ParseMode(text);
  if (!mode) {
    std::cerr << "ptybox mcp: unknown --mode \"" << text << "\" ("
              << ptybox::policy::ModeAlternatives() << ")\n";
    return 2;
  }
  ptybox::Result<ptybox::policy::ResolvedPolicy> resolved =
      ptybox::policy::Resolve(ptybox::runtime::ResolveInputsFrom(service, mode));
  // A policy flag's refusal is the flag's, reported by PolicyFlagsUsable, not the mode's.
  if (!resolved && resolved.error().kind == ptybox::ErrorKind::kPolicyDenied &&
      !resolved.error().context.starts_with(ptybox::policy::kCommandLineSource)) {
    std::cerr << "ptybox mcp: --mode " << text << " is refused: " << resolved.error().Describe()
              << "\n";
    return 2;
  }
  // Any other policy problem is reported at each spawn, as without --mode.
  service.mode_override = mode;
  return std::nullopt;
}

// One struct per subcommand: `Add` declares its flags on the application, `Run` acts on what was
// parsed and returns the exit code.
struct ServeCommand {
  CommonFlags flags;
  AuditFlags audit;
  bool stdio = false;
  std::string socket_path;
  size_t max_connections = ptybox::runtime::kDefaultMaxConnections;
  size_t max_sessions = ptybox::runtime::kDefaultMaxTotalSessions;
  CLI::App* app = nullptr;

  void Add(CLI::App& parent) {
    app = parent.add_subcommand("serve", "serve the JSON-RPC protocol");
    app->add_flag("--stdio", stdio, "one client on standard input/output");
    app->add_option("--socket", socket_path,
                    "many clients on a Unix socket (mode 0600); the default (neither --stdio nor "
                    "--socket) is ptybox.sock in this user's run-time directory: "
                    "$XDG_RUNTIME_DIR/ptybox/, /run/ptybox/ for root");
    app->add_option("--max-connections", max_connections,
                    "clients served at once on the socket; one more is refused (default 256)")
        ->check(CLI::Range(size_t{1}, size_t{65536}));
    app->add_option("--max-sessions", max_sessions,
                    "sessions open or opening across every client (default 256)")
        ->check(CLI::Range(size_t{1}, size_t{65536}));
    AddCommonFlags(app, flags);
    AddAuditFlags(app, audit, /*record=*/true);
  }

  int Run() const {
    using namespace ptybox::runtime;
    if (stdio && !socket_path.empty()) {
      std::cerr << "ptybox serve: give one of --stdio or --socket PATH, not both\n";
      return 2;
    }
    if (app->count("--socket") > 0 && socket_path.empty()) {
      std::cerr << "ptybox serve: --socket is empty (was a variable such as $XDG_RUNTIME_DIR "
                   "unset when the shell expanded it?); give a path, or leave --socket out for "
                   "the default\n";
      return 2;
    }
    DaemonOptions options;
    options.stdio = stdio;
    if (!socket_path.empty()) {
      options.socket = std::filesystem::absolute(socket_path);
    } else if (!stdio) {
      // The per-user run-time directory, hidden in every session (docs/security.md, Wall 2).
      ptybox::Result<std::filesystem::path> socket = DefaultSocketPath();
      if (!socket) {
        std::cerr << socket.error().message << "\n";
        return 2;
      }
      options.socket = *socket;
    }
    options.service = ServiceFrom(flags);
    options.max_connections = max_connections;
    options.service.max_total_sessions = max_sessions;
    return RunDaemonWithAudit(std::move(options), audit, "serve");
  }
};

struct McpCommand {
  CommonFlags flags;
  AuditFlags audit;
  std::string mode;
  std::string connect;
  int64_t consent_timeout = 300;
  int64_t max_result_bytes = static_cast<int64_t>(ptybox::runtime::kDefaultMcpResultBytes);
  CLI::App* app = nullptr;

  void Add(CLI::App& parent) {
    app = parent.add_subcommand("mcp", "serve the same tools as an MCP server on stdio");
    AddCommonFlags(app, flags);
    AddAuditFlags(app, audit, /*record=*/true);
    app->add_option("--mode", mode,
                    "the mode the model starts in: " + ptybox::policy::ModeAlternatives() +
                        " (default: the policy's mode); the model may narrow it, never widen it "
                        "without the user's consent");
    app->add_option("--connect", connect,
                    "serve as a client of a running `ptybox serve --socket SOCKET` daemon: the "
                    "terminals outlive this process for the daemon's limits.detachGraceMs and a "
                    "restarted ptybox mcp finds them (its owner token is kept under "
                    "$XDG_STATE_HOME/ptybox/)");
    app->add_option("--consent-timeout", consent_timeout,
                    "seconds the user has to answer a request to widen the mode (default 300; "
                    "1 to 86400); no answer is a refusal");
    app->add_option("--max-result-bytes", max_result_bytes,
                    "bytes every tool result may take, as the host receives it (default 16384; "
                    "4096 to 67108864): a longer viewport or page keeps its head and tail and "
                    "says which terminal_read returns the rest");
  }

  int Run() const {
    using namespace ptybox::runtime;
    DaemonOptions options;
    options.mcp = true;
    options.service = ServiceFrom(flags);
    if (!connect.empty()) {
      if (!mode.empty() || !flags.policy.empty()) {
        std::cerr << "ptybox mcp: --mode and --policy do not apply with --connect: the daemon's "
                     "policy and the attached owner's mode do (policy_set_mode changes it)\n";
        return 2;
      }
      if (!options.service.command_line.empty()) {
        std::cerr << "ptybox mcp: " << options.service.command_line.front().flag
                  << " does not apply with --connect: the daemon decides the policy of its "
                     "sessions. Give --network, --writable, --env and --hide to its `ptybox "
                     "serve`, or drop them\n";
        return 2;
      }
      std::error_code ec;
      options.mcp_options.connect = std::filesystem::absolute(connect, ec);
    }
    if (!mode.empty()) {
      if (std::optional<int> failed = SetMcpStartMode(mode, options.service)) return *failed;
    }
    if (consent_timeout < 1 || consent_timeout > 86400) {
      std::cerr << "ptybox mcp: --consent-timeout must be between 1 and 86400 seconds\n";
      return 2;
    }
    options.mcp_options.consent_timeout = std::chrono::seconds(consent_timeout);
    if (max_result_bytes < static_cast<int64_t>(kMinMcpResultBytes) ||
        max_result_bytes > 64 * 1024 * 1024) {
      std::cerr << "ptybox mcp: --max-result-bytes must be between 4096 and 67108864\n";
      return 2;
    }
    options.mcp_options.max_result_bytes = static_cast<size_t>(max_result_bytes);
    return RunDaemonWithAudit(std::move(options), audit, "mcp");
  }
};

struct RunSubcommand {
  CommonFlags flags;
  AuditFlags audit;
  std::string mode;
  int64_t timeout = 0;
  std::vector<std::string> command;
  CLI::App* app = nullptr;

  void Add(CLI::App& parent) {
    app = parent.add_subcommand("run", "run one command in the sandbox (for CI jobs)");
    AddCommonFlags(app, flags);
    AddAuditFlags(app, audit, /*record=*/false);
    app->add_option("--mode", mode, ptybox::policy::ModeAlternatives());
    app->add_option("--timeout", timeout,
                    "whole seconds before the command is ended (exit 124); 1 to 2592000");
    app->add_option("command", command, "the command and its arguments, after --")->required();
  }

  int Run() const {
    using namespace ptybox::runtime;
    RunOptions options;
    options.service = ServiceFrom(flags);
    if (!mode.empty()) {
      std::optional<ptybox::policy::Mode> parsed = ptybox::policy::ParseMode(mode);
      if (!parsed) {
        std::cerr << "ptybox run: unknown --mode \"" << mode << "\" ("
                  << ptybox::policy::ModeAlternatives() << ")\n";
        return kRunExitUsage;
      }
      options.service.mode_override = parsed;
    }
    if (app->count("--timeout") > 0) options.timeout_seconds = timeout;
    options.command = command;
    std::optional<std::shared_ptr<AuditLog>> log = AuditFrom(audit, options.service, "run");
    if (!log) return kRunExitSandbox;
    options.audit = *log;
    return RunCommand(options);
  }
};

// --socket, --token-file and --workspace of `ls` and `attach`.
void AddWatchFlags(CLI::App* sub, ptybox::runtime::WatchFlags& flags) {
  sub->add_option("--socket", flags.socket,
                  "the daemon's socket (default: where `ptybox serve` listens by default)");
  auto* token = sub->add_option(
      "--token-file", flags.token_file,
      "the owner token of the sessions to see (a 0600 file holding owner_info's ownerToken)");
  sub->add_option("--workspace", flags.workspace,
                  "see the sessions of the `ptybox mcp --connect` that runs in DIR (the token "
                  "it keeps under $XDG_STATE_HOME/ptybox/; default: the current directory's, "
                  "when kept)")
      ->excludes(token);
}

// `ptybox help [COMMAND...]`: the same text as `ptybox COMMAND... --help`.
int PrintHelp(CLI::App& app, const CLI::App* help, const std::vector<std::string>& names,
              const std::string& program) {
  CLI::App* topic = &app;
  std::string usage = program;  // as --help names it: "ptybox policy check"
  for (const std::string& name : names) {
    CLI::App* sub = nullptr;
    try {
      sub = topic->get_subcommand(name);
    } catch (const CLI::OptionNotFound&) {
    }
    if (sub == nullptr || sub == help) {
      std::cerr << "ptybox help: no command \"" << name << "\"; `ptybox --help` lists them\n";
      return ptybox::runtime::kRunExitUsage;
    }
    topic = sub;
    usage += " " + name;
  }
  // The formatter, not App::help(), which would describe the selected `help` itself.
  std::cout << topic->get_formatter()->make_help(topic, usage, CLI::AppFormatMode::Normal);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ptybox: persistent, sandboxed, interactive shells for AI agents and CI jobs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);

  ServeCommand serve;
  serve.Add(app);
  McpCommand mcp;
  mcp.Add(app);
  RunSubcommand run;
  run.Add(app);

  CLI::App* policy_cmd = app.add_subcommand("policy", "check or resolve policy files");
  policy_cmd->require_subcommand(1);
  std::vector<std::string> check_files;
  CLI::App* check = policy_cmd->add_subcommand("check", "validate policy files");
  check->add_option("files", check_files,
                    "files to check (default: the operator policy and ./.ptybox.yaml)");
  CommonFlags resolve_flags;
  CLI::App* resolve = policy_cmd->add_subcommand("resolve", "print the effective policy");
  AddCommonFlags(resolve, resolve_flags);

  CLI::App* doctor = app.add_subcommand("doctor", "can this host sandbox? what to change if not");

  CommonFlags demo_flags;
  CLI::App* demo = app.add_subcommand("demo", "a short sandboxed session, shown as JSON-RPC");
  AddCommonFlags(demo, demo_flags, /*policy_flags=*/false);

  // A person's view of a running daemon's sessions (docs/protocol.md, "Watching a session").
  ptybox::runtime::WatchFlags ls_flags;
  bool ls_json = false;
  CLI::App* ls = app.add_subcommand("ls", "list the sessions of a running daemon you may watch");
  AddWatchFlags(ls, ls_flags);
  ls->add_flag("--json", ls_json, "print {\"sessions\": [...]} as terminal_list returns it");
  ptybox::runtime::WatchFlags attach_flags;
  std::string attach_session;
  bool attach_write = false;
  CLI::App* attach = app.add_subcommand("attach",
                                        "watch a session's screen live, read-only unless --write "
                                        "(Ctrl-] detaches; the session goes on)");
  AddWatchFlags(attach, attach_flags);
  attach->add_option("session", attach_session, "the sessionId (`ptybox ls` lists them)")
      ->required();
  attach->add_flag("--write", attach_write,
                   "take the session over: your keys go to it and the agent's sends answer busy "
                   "until you detach");

  // `ptybox help [COMMAND...]`, as git and cargo have it: the same text as --help.
  std::vector<std::string> help_topic;
  CLI::App* help = app.add_subcommand("help", "print this help, or a command's (help COMMAND)");
  help->add_option("command", help_topic, "the command, e.g. serve or policy check");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); a usage error exits 2, never a code of its own
    // that `ptybox run` could be mistaken to pass through from the command.
    return app.exit(e) == 0 ? 0 : ptybox::runtime::kRunExitUsage;
  }

  if (help->parsed()) return PrintHelp(app, help, help_topic, argv[0]);
  using namespace ptybox::runtime;
  if (serve.app->parsed()) return serve.Run();
  if (mcp.app->parsed()) return mcp.Run();
  if (run.app->parsed()) return run.Run();
  if (check->parsed()) {
    return PolicyCheck(check_files, ServiceFrom(CommonFlags{}).default_operator_policy);
  }
  if (resolve->parsed()) return PolicyResolve(ServiceFrom(resolve_flags));
  if (doctor->parsed()) return Doctor();
  if (demo->parsed()) return Demo(argv[0], ServiceFrom(demo_flags));
  if (ls->parsed()) return ListSessions(ls_flags, ls_json);
  if (attach->parsed()) return AttachSession(attach_flags, attach_session, attach_write);
  return 2;
}
