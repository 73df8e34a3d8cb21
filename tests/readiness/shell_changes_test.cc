// What agents do to their own shell, through the real binary: job-status notices before the
// prompt, PROMPT_COMMAND assigned, prepended, appended (string and array), PS1 set, an rc file
// sourced, a heredoc. After each, a send still settles at the verified prompt with the exact
// exitCode and cwd, and no viewport holds bash's own prompt, a continuation prompt or the input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

// A viewport line that is a prompt: ptybox's ("$"), bash's own ("user@host:~$") or a
// continuation prompt (">").
bool HoldsAPrompt(const std::string& viewport) {
  size_t start = 0;
  while (start <= viewport.size()) {
    size_t end = viewport.find('\n', start);
    if (end == std::string::npos) end = viewport.size();
    std::string line = viewport.substr(start, end - start);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (line == "$" || line == ">" || line.ends_with("$") || line.starts_with("> ")) return true;
    start = end + 1;
  }
  return false;
}

class ShellChangesTest : public SharedDaemonModeTest {
 protected:
  // After any shell change, `exec bash` and the ways around its machinery included: ptybox's
  // hook is there again in every mode (through the machinery's pipes, or typed back with the
  // nonce written into a pipe of the new shell: docs/readiness.md, "exec bash").
  void AfterExec(const std::string& id, const std::string& change) { StillExact(id, change); }

  // A send that must settle at the shell's verified prompt with `exit_code`.
  Json AtPrompt(const std::string& id, const std::string& input, int exit_code) {
    Json r = Send(client_, id, input, Json{{"silenceMs", 20000}, {"timeoutMs", 30000}});
    EXPECT_EQ(r["waitReason"], "stdin_read") << input << r.dump();
    EXPECT_EQ(r["exitCode"], exit_code) << input << r.dump();
    EXPECT_TRUE(r["cwd"].is_string()) << input << r.dump();
    if (r["viewport"].is_string()) {
      EXPECT_FALSE(HoldsAPrompt(r["viewport"].get<std::string>())) << input << r.dump();
    }
    return r;
  }

  // The checks after any change: exit codes, cwd, viewports without prompts or echo.
  void StillExact(const std::string& id, const std::string& change) {
    SCOPED_TRACE(change);
    Json r = AtPrompt(id, "echo one; (exit 4)\n", 4);
    EXPECT_EQ(r["viewport"], "one") << r.dump();
    r = AtPrompt(id, "cd /tmp\n", 0);
    EXPECT_EQ(r["cwd"], "/tmp") << r.dump();
    EXPECT_EQ(r["viewport"], "") << r.dump();
    r = AtPrompt(id, "echo two\n", 0);
    EXPECT_EQ(r["viewport"], "two") << r.dump();
    r = AtPrompt(id, "false\n", 1);
    EXPECT_EQ(r["viewport"], "") << r.dump();
  }
};

TEST_P(ShellChangesTest, PromptCommandAndPs1ChangesKeepExitCodesExact) {
  const std::vector<std::string> changes = {
      "PROMPT_COMMAND='history -a'\n",
      "_h() { return 0; }; PROMPT_COMMAND=\"_h;$PROMPT_COMMAND\"\n",
      "PROMPT_COMMAND=\"${PROMPT_COMMAND:+$PROMPT_COMMAND; }true\"\n",
      "PROMPT_COMMAND+=' (exit 9)'\n",
      "PROMPT_COMMAND+=(false)\n",
      "PROMPT_COMMAND=(true false)\n",
      "unset PROMPT_COMMAND\n",
      "export PROMPT_COMMAND='history -a'\n",
      "PS1='\\u@\\h:\\w\\$ '\n",
      "PS1='> '; PS2='... '\n",
      ". ./ptybox-rc\n",  // written below: PS1, a prepended PROMPT_COMMAND, an alias
      // A mail message runs after PROMPT_COMMAND, before PS1, as the shell: its command
      // substitution would set `$?` (the hook turns mail checks off).
      "MAILCHECK=0 MAILPATH=\"/tmp/ptybox-mail-$$?\\$(exit 42)\"; touch -d '+1 hour' "
      "/tmp/ptybox-mail-$$\n",
  };
  {
    std::ofstream rc(daemon_->workspace() / "ptybox-rc");
    rc << "PS1='\\u@\\h:\\w\\$ '\nPROMPT_COMMAND=\"history -a; $PROMPT_COMMAND\"\n"
          "alias ll='ls -l'\n";
  }
  for (const std::string& change : changes) {
    const std::string id = Open();
    Json r = AtPrompt(id, change, 0);
    EXPECT_EQ(r["viewport"], "") << change << r.dump();
    StillExact(id, change);
  }
}

TEST_P(ShellChangesTest, HeredocShowsNoContinuationPrompts) {
  const std::string id = Open();
  // A file of its own (danger-full-access shares the host's /tmp with other users' runs).
  AtPrompt(id, "f=$(mktemp)\n", 0);
  Json r = AtPrompt(id, "cat > \"$f\" <<'EOF'\nline one\nline two\nEOF\n", 0);
  EXPECT_EQ(r["viewport"], "") << r.dump();
  r = AtPrompt(id, "cat \"$f\"; rm -f \"$f\"; (exit 2)\n", 2);
  EXPECT_EQ(r["viewport"], "line one\nline two") << r.dump();
  r = AtPrompt(id, "for i in 1 2\ndo echo $i\ndone\n", 0);
  EXPECT_EQ(r["viewport"], "1\n2") << r.dump();
  StillExact(id, "heredoc");
}

// Bash prints the notices of finished jobs (`[1]+  Done ...`) before the prompt: they are
// output of the send; the prompt after them still settles it with its exit code.
TEST_P(ShellChangesTest, JobNoticesBeforeThePromptKeepExitCodes) {
  const std::string id = Open();
  AtPrompt(id, "sleep 0.2 &\n", 0);
  // Waits for the job without `wait` (which would consume the notice).
  Json r = AtPrompt(id, "while kill -0 $! 2>/dev/null; do sleep 0.05; done; (exit 5)\n", 5);
  std::string all = r["viewport"].get<std::string>();
  r = AtPrompt(id, "echo x\n", 0);
  all += "\n" + r["viewport"].get<std::string>();
  EXPECT_NE(all.find("Done"), std::string::npos) << all;

  // A job that exits with a status: "Exit 3".
  AtPrompt(id, "(sleep 0.1; exit 3) &\n", 0);
  r = AtPrompt(id, "while kill -0 $! 2>/dev/null; do sleep 0.05; done; (exit 6)\n", 6);
  all = r["viewport"].get<std::string>();
  r = AtPrompt(id, "echo y\n", 0);
  all += "\n" + r["viewport"].get<std::string>();
  EXPECT_NE(all.find("Exit 3"), std::string::npos) << all;

  // kill %1: "Terminated".
  AtPrompt(id, "sleep 100 &\n", 0);
  r = AtPrompt(id, "kill %1; (exit 7)\n", 7);
  all = r["viewport"].get<std::string>();
  r = AtPrompt(id, "while kill -0 $! 2>/dev/null; do sleep 0.05; done; (exit 8)\n", 8);
  all += "\n" + r["viewport"].get<std::string>();
  r = AtPrompt(id, "echo z\n", 0);
  all += "\n" + r["viewport"].get<std::string>();
  EXPECT_NE(all.find("Terminated"), std::string::npos) << all;

  // Stopped, then bg, then killed.
  AtPrompt(id, "sleep 100 &\n", 0);
  r = AtPrompt(id, "kill -STOP %1; while [[ $(jobs -s) == '' ]]; do sleep 0.05; done; (exit 2)\n",
               2);
  AtPrompt(id, "bg %1\n", 0);
  AtPrompt(id, "kill -9 %1; (exit 3)\n", 3);
  AtPrompt(id, "wait; (exit 4)\n", 4);

  // set -b: notices printed at once, while a command runs.
  AtPrompt(id, "set -b\n", 0);
  AtPrompt(id, "sleep 0.1 &\n", 0);
  r = AtPrompt(id, "sleep 0.5; (exit 9)\n", 9);
  AtPrompt(id, "set +b\n", 0);
  StillExact(id, "job notices");
}

// `stty sane` / `stty echo` turn the terminal's ECHO back on: readline then repeats the input
// after the prompt. The input stays out of the viewport and the exit codes stay exact.
TEST_P(ShellChangesTest, SttySaneKeepsTheInputOutOfViewports) {
  for (const std::string change : {"stty sane\n", "stty echo\n"}) {
    const std::string id = Open();
    AtPrompt(id, change, 0);
    // The first send after the change is echoed line by line, a heredoc's lines too.
    Json r = AtPrompt(id, "cat <<'EOF'; (exit 3)\nline one\nEOF\n", 3);
    EXPECT_EQ(r["viewport"], "line one") << change << r.dump();
    AtPrompt(id, change, 0);
    StillExact(id, change);
    // ptybox's own settings come back: the daemon clears ECHO while the command runs, after
    // readline's restore. A command that ends before the daemon has read its echo (a daemon
    // slower than bash: a sanitizer build, a busy machine) leaves ECHO on for the next send,
    // echo recognised as above; one that runs a while (`sleep`) sees it off, the second time
    // at the latest.
    AtPrompt(id, change, 0);
    bool echo_off = false;
    for (int attempt = 0; attempt < 3 && !echo_off; ++attempt) {
      r = AtPrompt(id, "sleep 0.5; stty -a | tr ' ' '\\n' | grep -cx -- -echo; true\n", 0);
      echo_off = r["viewport"] == "1";
    }
    EXPECT_TRUE(echo_off) << change << r.dump();
  }
}

// Code sourced into the shell (an `activate` script) tries to take the prompt hook over: it
// unsets `__ptybox_prompt`, then defines it anew to set a PS1 whose marker always says 0 (built
// from the nonce it can read). The hook is a read-only function: bash refuses both, visibly, and
// every later exit code is still the command's own. (Without it, `false` reported 0.)
TEST_P(ShellChangesTest, SourcedCodeCannotRedefineOrUnsetThePromptHook) {
  {
    std::ofstream f(daemon_->workspace() / "activate-hook");
    f << "unset -f __ptybox_prompt\n"
         "__ptybox_prompt() { PS1=\"${__ptybox_ps1//'$?'/0}\"; }\n"
         "echo sourced\n";
  }
  const std::string id = Open();
  Json r = AtPrompt(id, ". ./activate-hook\n", 0);
  const std::string viewport = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  EXPECT_NE(viewport.find("__ptybox_prompt: readonly function"), std::string::npos) << r.dump();
  EXPECT_NE(viewport.find("cannot unset: readonly function"), std::string::npos) << r.dump();
  EXPECT_NE(viewport.find("sourced"), std::string::npos) << r.dump();
  StillExact(id, "sourced hook redefinition");
  r = AtPrompt(id, "(exit 7)\n", 7);
}

// `exec bash` / `exec $SHELL` / `exec bash -l` / `exec bash --norc` (after installing nvm or
// rustup): `exec bash`, `-l`, `--norc` go through the exec machinery (the new image installs the
// hook from its rc file, with the nonce handed over through a pipe); `exec $SHELL` bypasses it,
// and the daemon types the hook back with a fresh nonce (danger-full-access only,
// backend/readiness/rebootstrap.h). Exit codes and cwd are exact again, no viewport shows a
// prompt or a bootstrap, and no bootstrap is in the shell's history.
TEST_P(ShellChangesTest, ExecBashGetsTheHookBack) {
  for (const std::string change : {"exec bash\n", "exec $SHELL\n", "exec $SHELL -l\n",
                                   "exec bash -l\n", "exec bash --norc\n"}) {
    SCOPED_TRACE(change);
    // $SHELL is the user's login shell (the test user's may be /bin/sh, see ExecSh...).
    const std::string id = Open(Json{{"env", {{"SHELL", "/bin/bash"}}}});
    const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
    Json r = Send(client_, id, change, options);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 0) << r.dump();
    EXPECT_EQ(r["viewport"], "") << r.dump();
    AfterExec(id, change);
    // The new shell's last entries: the sends above and this one, not the bootstrap.
    r = Send(client_, id, "history 6\n", options);
    EXPECT_NE(r["viewport"].get<std::string>().find("echo one; (exit 4)"), std::string::npos)
        << r.dump();
    EXPECT_EQ(r["viewport"].get<std::string>().find("__ptybox"), std::string::npos) << r.dump();
    // Again: the hook is given back to each new image of the shell (after `exec $SHELL` in a
    // confined session there is no machinery left, so `exec bash` is the builtin's).
    r = Send(client_, id, "exec bash\n", options);
    EXPECT_EQ(r["viewport"], "") << r.dump();
    AfterExec(id, change + " twice");
  }
}

// Readline may hold a line nobody ended when the hook is given back: in the forged-prompt suite
// a program read the rest of the agent's line; here the new shell's readline takes a line that
// opens a quote and whose Enter is quoted (^V), so every byte the agent wrote ended a line and
// none of it is accepted (a bootstrap typed after it would be inside the quote).
// The next send discards that line first, as every send to the line editor does (the typed
// bootstrap of danger-full-access did too: typed onto its end it left the session without exit
// codes for good). The new image has the hook already: the daemon must not type into it (it did
// once here, and the tracker's fresh nonce never reached the read-only hook).
TEST_P(ShellChangesTest, ExecBashWithAPartLineInReadlineGetsTheHookBack) {
  const std::string id = Open();
  const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client_, id, "exec bash\necho 'part-of-a-line\x16\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  AfterExec(id, "exec bash with a part line");
  r = Send(client_, id, "echo $((20+3))\n", options);
  EXPECT_EQ(r["viewport"], "23") << "the part line never ran: " << r.dump();
}

// Nothing the session prints or reads starts the bootstrap: the shell's own readline waiting
// behind a bash-shaped prompt (`read -e -p`: the shell's main task alone, raw mode, no marker)
// is the same program image, so the agent's next line reaches the `read`, not a bootstrap.
TEST_P(ShellChangesTest, APromptWithoutAnExecNeverGetsTheBootstrap) {
  const std::string id = Open();
  const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client_, id, "read -e -p 'user@host:~$ ' x\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = AtPrompt(id, "typed\n", 0);
  r = AtPrompt(id, "echo \"$x\"\n", 0);
  EXPECT_EQ(r["viewport"], "typed") << r.dump();
  StillExact(id, "read -e");
}

// A shell that is not bash (`exec sh`) never gets the bootstrap typed into it: no marker, so
// exit codes stay null, never another command's; its prompt stays out of the viewport.
TEST_P(ShellChangesTest, ExecShNeverReportsAWrongExitCode) {
  const std::string id = Open();
  const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client_, id, "exec sh\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  const struct {
    std::string input;
    std::string viewport;
  } steps[] = {{"echo one; (exit 4)\n", "one"}, {"cd /tmp\n", ""}, {"echo two; false\n", "two"}};
  for (const auto& step : steps) {
    r = Send(client_, id, step.input, options);
    EXPECT_EQ(r["waitReason"], "stdin_read") << step.input << r.dump();
    EXPECT_TRUE(r["exitCode"].is_null()) << step.input << r.dump();
    EXPECT_TRUE(r["cwd"].is_null()) << step.input << r.dump();
    EXPECT_EQ(r["viewport"].get<std::string>().find("__ptybox"), std::string::npos) << r.dump();
    EXPECT_TRUE(r["foreground"].is_null()) << step.input << r.dump();
  }
}

// A background job does not stop `exec bash` from keeping the hook (nothing is typed: the new
// image gets it through pipes). `builtin exec bash` bypasses the machinery: while anything else
// lives in the session the daemon types nothing (exit codes null, never wrong); once the job has
// ended, the next send gets the hook back in danger-full-access and stays null in a confined one.
TEST_P(ShellChangesTest, ExecBashWithABackgroundJobKeepsTheHook) {
  const std::string id = Open();
  const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  // Exported: the job's pid outlives the exec in the environment.
  Json r = AtPrompt(id, "sleep 1000 & export JOB=$!\n", 0);
  r = Send(client_, id, "exec bash\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  r = AtPrompt(id, "echo one; (exit 4)\n", 4);
  EXPECT_EQ(r["viewport"], "one") << r.dump();
  r = Send(client_, id, "builtin exec bash\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  r = Send(client_, id, "echo two; (exit 4)\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  EXPECT_EQ(r["viewport"], "two") << r.dump();
  // Until it is gone (a zombie's cmdline is empty; it runs nothing and holds no terminal).
  r = Send(client_, id,
           "kill $JOB; while grep -qs '' /proc/$JOB/cmdline; do sleep 0.05; done; echo ended\n",
           options);
  EXPECT_EQ(r["viewport"], "ended") << r.dump();
  AfterExec(id, "builtin exec bash, after the job ended");
}

// `exec` with redirections alone keeps them (the machinery's `exec` is the builtin: a function
// would undo them when it returns), and `exec` of anything but bash hands nothing over.
TEST_P(ShellChangesTest, ExecWithRedirectionsAloneKeepsThem) {
  const std::string id = Open();
  Json r = AtPrompt(id, "exec 3>/tmp/exec-redir-$$; echo kept >&3; cat /tmp/exec-redir-$$\n", 0);
  EXPECT_EQ(r["viewport"], "kept") << r.dump();
  r = AtPrompt(id, "exec 3>&-; echo closed >&3\n", 1);
  r = AtPrompt(id, "bash -c 'ls /proc/self/fd | grep -c -x -e 12 -e 10 -e 11'\n", 1);
  EXPECT_EQ(r["viewport"], "0") << r.dump();
  StillExact(id, "exec redirections");
}

// The ways around the machinery (`builtin exec bash`, `command exec bash`, `exec /bin/bash`,
// `exec bash -c ...`, `exec bash` with an option it does not know) start bash without a nonce:
// exit codes null in a confined session (danger-full-access types the hook back), never wrong.
TEST_P(ShellChangesTest, ExecBashAroundTheMachineryNeverGivesAWrongExitCode) {
  for (const std::string change : {"builtin exec bash\n", "command exec bash\n", "exec /bin/bash\n",
                                   "exec bash -O extglob\n", "exec bash -c 'exec bash'\n"}) {
    SCOPED_TRACE(change);
    const std::string id = Open();
    const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
    Json r = Send(client_, id, change, options);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 0) << r.dump();
    AfterExec(id, "around: " + change);
  }
}

// rc files planted in the home by a program of the session (here a program writes them) run
// as the new shell's own code after `exec bash`, like any sourced file: after the hook. They find
// the handed-over pipes closed, cannot redefine the hook, and every later exit code is exact. A
// planted ~/.inputrc is read by readline at the first prompt, after the rc file: its `$include`
// of the nonce pipe reads nothing. (danger-full-access: HOME is a directory of the test's.)
TEST_P(ShellChangesTest, PlantedRcFilesRunAfterTheHookAndFindNoPipe) {
  Json extra = Json::object();
  if (GetParam() == "danger-full-access") {
    const std::string home = "/tmp/ptybox-planted-home-" + std::to_string(::getpid());
    std::filesystem::create_directories(home);
    extra = Json{{"env", {{"HOME", home}}}};
  }
  const std::string id = Open(extra);
  {
    std::ofstream(daemon_->workspace() / "planted-bashrc")
        << "for f in 12 10 11; do [[ -e /dev/fd/$f ]] && echo planted-sees-$f; done\n"
           "unset -f __ptybox_prompt; __ptybox_prompt() { :; }\n"
           "echo planted-ran\n";
    std::ofstream(daemon_->workspace() / "planted-inputrc")
        << "$include /proc/self/fd/11\nset completion-ignore-case on\n";
  }
  // A program (cp) puts them in place.
  const std::string plant = "cp planted-bashrc ~/.bashrc && cp planted-inputrc ~/.inputrc\n";
  Json r = AtPrompt(id, plant, 0);
  const Json options{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  r = Send(client_, id, "exec bash\n", options);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  const std::string viewport = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  EXPECT_NE(viewport.find("planted-ran"), std::string::npos) << r.dump();
  EXPECT_EQ(viewport.find("planted-sees-"), std::string::npos) << r.dump();
  EXPECT_NE(viewport.find("readonly function"), std::string::npos) << r.dump();
  r = AtPrompt(id, "bind -v | grep -c 'completion-ignore-case on'\n", 0);
  EXPECT_EQ(r["viewport"], "1") << r.dump();
  StillExact(id, "planted ~/.bashrc and ~/.inputrc");
}

INSTANTIATE_TEST_SUITE_P(Modes, ShellChangesTest,
                         ::testing::Values("danger-full-access", "workspace-write", "read-only"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
