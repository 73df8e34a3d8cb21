// The marker rule: "a marker is not ready until the printable tail after the latest owned marker
// exactly equals the controlled PS1", including when marker and prompt arrive split.
#include "backend/readiness/prompt_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "backend/terminal/vt_parser.h"

namespace ptybox::backend {
namespace {

constexpr std::string_view kNonce = "0123456789abcdef0123456789abcdef";

class Recorder final : public PromptTracker::Listener {
 public:
  std::vector<std::string> events;
  void OnMarker(const PromptMarker& m) override {
    events.push_back("marker:" + std::to_string(m.exit_code) + ":" + m.cwd);
  }
  void OnCandidate() override { events.push_back("candidate"); }
  void OnInvalidated() override { events.push_back("invalidated"); }
};

std::string Osc(std::string_view payload, bool st = false) {
  return "\x1b]" + std::string(payload) + (st ? "\x1b\\" : "\a");
}

TEST(PromptMarkerTest, RoundTripsExitCodeAndAnyWorkingDirectory) {
  const std::vector<std::string> cwds = {"/", "/tmp/a b", "/tmp/100%", "/tmp/a\nb\x1b\x07z",
                                         "/tmp/\xc3\xa9t\xc3\xa9"};
  for (const std::string& cwd : cwds) {
    std::string payload = FormatPromptMarker(kNonce, 130, cwd);
    EXPECT_EQ(payload.find('\x1b'), std::string::npos);
    EXPECT_EQ(payload.find('\a'), std::string::npos);
    std::optional<PromptMarker> m = ParsePromptMarker(payload, kNonce);
    ASSERT_TRUE(m) << payload;
    EXPECT_EQ(m->exit_code, 130);
    EXPECT_EQ(m->cwd, cwd);
  }
}

TEST(PromptMarkerTest, RejectsOtherNoncesAndMalformedPayloads) {
  EXPECT_FALSE(ParsePromptMarker("6973;ffffffffffffffffffffffffffffffff;0;/", kNonce));
  EXPECT_FALSE(ParsePromptMarker("6973;" + std::string(kNonce) + ";x;/", kNonce));
  EXPECT_FALSE(ParsePromptMarker("6973;" + std::string(kNonce) + ";;/", kNonce));
  EXPECT_FALSE(ParsePromptMarker("6973;" + std::string(kNonce), kNonce));
  EXPECT_FALSE(ParsePromptMarker("0;window title", kNonce));
  EXPECT_TRUE(ParsePromptMarker("6973;" + std::string(kNonce) + ";0;", kNonce));
}

TEST(PromptMarkerTest, NoncesAreFreshAnd128Bits) {
  std::string a = NewPromptNonce();
  std::string b = NewPromptNonce();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

// The environment is readable by the session's other processes: the code there has no nonce.
// It reads the nonce from the terminal and keeps it in a read-only variable.
TEST(PromptMarkerTest, PromptCommandCarriesNoNonceAndReadsItFromTheTerminal) {
  const std::string code = BuildPromptCommand();
  EXPECT_EQ(code.find(std::string(kNonce)), std::string::npos);
  EXPECT_NE(code.find("IFS= read -r __ptybox_n;"), std::string::npos);
  EXPECT_NE(code.find("declare -gr __ptybox_ps1="), std::string::npos);
  EXPECT_NE(code.find("export -n PS1"), std::string::npos);
  // The hook function is read-only once defined (sourced code cannot redefine it).
  EXPECT_NE(code.find("; declare -fr __ptybox_prompt;"), std::string::npos);
  EXPECT_NE(code.find("PROMPT_COMMAND[" + std::to_string(kPromptHookIndex) + "]='"),
            std::string::npos);
  EXPECT_EQ(NonceLine(kNonce), std::string(kNonce) + "\n");
}

// `exec bash` (docs/readiness.md, "exec bash"): the first shell's bootstrap defines the exec
// machinery and holds the rc file a new image gets; neither holds a nonce. `exec` stays the
// builtin (an alias ending in a blank, so `exec >file` keeps its redirections), and only the
// word `bash` right after it becomes the launcher, which finds the copy in the hash table.
TEST(ExecMachineryTest, TheBootstrapArmsExecWithoutANonce) {
  const std::string code = BuildPromptCommand();
  EXPECT_NE(code.find("alias exec='exec ' bash='__ptybox_bash 10<<<\"$__ptybox_rc\" "
                      "11<<<\"$__ptybox_ps1\" -p -c "),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("hash -p \"$__ptybox_t\" __ptybox_bash"), std::string::npos);
  EXPECT_NE(code.find("declare -gr __ptybox_rc='"), std::string::npos);
  EXPECT_NE(code.find("/proc/self/fd/" + std::to_string(kExecCopyFd)), std::string::npos);
  // A plain `bash` drops the alias's words and closes the pipes for the child.
  EXPECT_NE(code.find("__ptybox_bash() { shift 4; command bash \"$@\" 12<&- 10<&- 11<&-; }"),
            std::string::npos);
  EXPECT_EQ(code.find("function exec"), std::string::npos);
  EXPECT_EQ(code.find("exec() "), std::string::npos);
  // Re-armed before every prompt (a user's `unalias -a` or `hash -r`).
  const size_t fn = code.find("__ptybox_prompt() {");
  ASSERT_NE(fn, std::string::npos);
  EXPECT_NE(code.find("alias exec=", fn), std::string::npos);
}

// The rc file of the new image: one line without a nonce; it takes the nonce from the PS1 the
// old shell handed over on pipe 11, keeps its own text from pipe 12, closes 12-11 before
// anything else runs, installs the hook, and only then reads the user's rc files.
TEST(ExecMachineryTest, TheRcFileInstallsTheHookBeforeTheUsersRcFiles) {
  const std::string rc = BuildExecRc();
  EXPECT_EQ(rc.find('\n'), std::string::npos);
  EXPECT_EQ(rc.find('!'), std::string::npos);
  EXPECT_TRUE(
      rc.starts_with("{ __ptybox_o=$-; set +xvT; __ptybox_n=; __ptybox_m=${__PTYBOX_EXEC-}"))
      << rc;
  const size_t read_nonce = rc.find("\\read -r __ptybox_p <&11;");
  const size_t close = rc.find("\\exec 12<&- 10<&- 11<&-;");
  const size_t hook = rc.find("declare -fr __ptybox_prompt");
  const size_t bashrc = rc.find(". ~/.bashrc");
  const size_t profile = rc.find(". /etc/profile");
  ASSERT_NE(read_nonce, std::string::npos) << rc;
  ASSERT_NE(close, std::string::npos) << rc;
  ASSERT_NE(hook, std::string::npos) << rc;
  ASSERT_NE(bashrc, std::string::npos) << rc;
  ASSERT_NE(profile, std::string::npos) << rc;
  EXPECT_LT(read_nonce, close);
  EXPECT_LT(close, hook);
  EXPECT_LT(hook, bashrc);
  EXPECT_LT(hook, profile);
  // The hook is installed inside the silenced group: xtrace never prints the nonce.
  EXPECT_LT(hook, rc.find("} 2>/dev/null;"));
  // The new image keeps its PROMPT_COMMAND element 0 (an rc file's `history -a`).
  EXPECT_EQ(rc.find("unset PROMPT_COMMAND"), std::string::npos);
  EXPECT_TRUE(rc.ends_with("unset __ptybox_m __ptybox_f"));
}

// The marker is part of PS1: bash prints it after its job notices and reads `$?` as restored
// after PROMPT_COMMAND; the directory is bash's own quoting.
TEST(PromptMarkerTest, Ps1CarriesTheMarkerAsInvisiblePromptText) {
  EXPECT_EQ(PromptPs1(kNonce), "\\[\\e]6973;" + std::string(kNonce) + ";$?;${PWD@Q}\\a\\]$ ");
}

TEST(PromptMarkerTest, TheLastingHookCarriesNoNonceAndSilencesTracing) {
  const std::string hook = PromptHookCommand();
  EXPECT_EQ(hook.find(std::string(kNonce)), std::string::npos);
  EXPECT_EQ(hook.find("printf"), std::string::npos);
  EXPECT_EQ(hook, "{ __ptybox_o=$-; set +xvT; __ptybox_prompt; } 2>/dev/null");
  const std::string code = BuildPromptCommand();
  EXPECT_NE(code.find("]='" + hook + "'"), std::string::npos);
  EXPECT_TRUE(code.starts_with("{ __ptybox_o=$-; set +xvT; "));
  EXPECT_TRUE(code.ends_with("} 2>/dev/null"));
}

TEST(PromptMarkerTest, DecodesBashQuotedDirectories) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"'/tmp'", "/tmp"},
      {"'/tmp/a b'", "/tmp/a b"},
      {"'/tmp/it'\\''s'", "/tmp/it's"},
      {"$'/tmp/a\\nb%'", "/tmp/a\nb%"},
      {"$'/t\\E\\a\\t\\001\\x7f\\'q'", "/t\x1b\a\t\x01\x7f'q"},
      {"$'/\\351t\\351'", "/\351t\351"},
      {"'/tmp/\xc3\xa9'", "/tmp/\xc3\xa9"},
  };
  for (const auto& [field, want] : cases) {
    std::optional<std::string> got = DecodePromptDirectory(field);
    ASSERT_TRUE(got) << field;
    EXPECT_EQ(*got, want) << field;
    std::optional<PromptMarker> m =
        ParsePromptMarker("6973;" + std::string(kNonce) + ";4;" + field, kNonce);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->exit_code, 4);
    EXPECT_TRUE(m->cwd_known);
    EXPECT_EQ(m->cwd, want);
  }
  // Not decodable: the marker still counts, the directory is unknown (reported null).
  for (std::string_view bad : {"'/tmp", "$'/tmp\\q'", "tmp", "", "$'/a\\"}) {
    EXPECT_FALSE(DecodePromptDirectory(bad)) << bad;
    std::optional<PromptMarker> m =
        ParsePromptMarker("6973;" + std::string(kNonce) + ";0;" + std::string(bad), kNonce);
    ASSERT_TRUE(m) << bad;
    EXPECT_FALSE(m->cwd_known) << bad;
  }
}

TEST(PromptMarkerTest, ContinuationMarkerIsInvisibleAndOwned) {
  EXPECT_EQ(PromptPs2(kNonce), "\\[\\e]6973;" + std::string(kNonce) + ";ps2\\a\\]");
  EXPECT_TRUE(IsContinuationMarker("6973;" + std::string(kNonce) + ";ps2", kNonce));
  EXPECT_FALSE(IsContinuationMarker("6973;ffffffffffffffffffffffffffffffff;ps2", kNonce));
  EXPECT_FALSE(IsContinuationMarker("6973;" + std::string(kNonce) + ";ps2x", kNonce));
  EXPECT_FALSE(ParsePromptMarker("6973;" + std::string(kNonce) + ";ps2", kNonce));
}

class TrackerTest : public ::testing::Test {
 protected:
  Recorder recorder_;
  PromptTracker tracker_{std::string(kNonce), "$ ", recorder_};
  VtParser parser_{tracker_, 256 * 1024};
  std::string Marker(int code = 0) { return Osc(FormatPromptMarker(kNonce, code, "/w")); }
};

TEST_F(TrackerTest, MarkerThenExactPs1IsACandidate) {
  parser_.Feed(Marker() + "$ ");
  EXPECT_EQ(recorder_.events, (std::vector<std::string>{"marker:0:/w", "candidate"}));
  EXPECT_TRUE(tracker_.candidate());
}

TEST_F(TrackerTest, NonPrintingSequencesBetweenMarkerAndPs1DoNotCount) {
  parser_.Feed(Marker() + "\x1b[?2004h$ ");
  EXPECT_TRUE(tracker_.candidate());
}

TEST_F(TrackerTest, OutputAfterThePromptInvalidatesIt) {
  parser_.Feed(Marker() + "$ ");
  parser_.Feed("x");
  EXPECT_FALSE(tracker_.candidate());
  EXPECT_EQ(recorder_.events.back(), "invalidated");
}

TEST_F(TrackerTest, EchoedInputAfterAnEarlierPromptCannotSettle) {
  parser_.Feed(Marker() + "$ echo hi\r\nhi\r\n");
  EXPECT_FALSE(tracker_.candidate());
  // Text that looks like the prompt, without an owned marker, is not a prompt.
  parser_.Feed("$ ");
  EXPECT_FALSE(tracker_.candidate());
}

TEST_F(TrackerTest, ForgedMarkerWithAnotherNonceIsIgnored) {
  parser_.Feed(Osc("6973;ffffffffffffffffffffffffffffffff;0;/") + "$ ");
  EXPECT_TRUE(recorder_.events.empty());
  EXPECT_FALSE(tracker_.candidate());
}

TEST_F(TrackerTest, OnlyTheLatestMarkerCounts) {
  parser_.Feed(Marker(1) + "$ " + Marker(2));
  EXPECT_FALSE(tracker_.candidate());
  parser_.Feed("$ ");
  EXPECT_TRUE(tracker_.candidate());
  EXPECT_EQ(recorder_.events, (std::vector<std::string>{"marker:1:/w", "candidate", "invalidated",
                                                        "marker:2:/w", "candidate"}));
}

TEST(TrackerSplitTest, MarkerAndPromptSplitAtEveryByteBoundary) {
  const std::string stream =
      "out\r\n" + Osc(FormatPromptMarker(kNonce, 7, "/tmp/x")) + "\x1b[?2004h$ ";
  const std::string stream_st =
      "out\r\n" + Osc(FormatPromptMarker(kNonce, 7, "/tmp/x"), true) + "$ ";
  for (const std::string& s : {stream, stream_st}) {
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      Recorder recorder;
      PromptTracker tracker(std::string(kNonce), "$ ", recorder);
      VtParser parser(tracker, 256 * 1024);
      parser.Feed(s.substr(0, cut));
      // Not a candidate before the last byte of the prompt has arrived.
      if (cut < s.size()) {
        EXPECT_FALSE(tracker.candidate()) << "cut " << cut;
      }
      parser.Feed(s.substr(cut));
      EXPECT_TRUE(tracker.candidate()) << "cut " << cut;
      EXPECT_EQ(recorder.events, (std::vector<std::string>{"marker:7:/tmp/x", "candidate"}))
          << "cut " << cut;
    }
    // Byte by byte.
    Recorder recorder;
    PromptTracker tracker(std::string(kNonce), "$ ", recorder);
    VtParser parser(tracker, 256 * 1024);
    for (char c : s) parser.Feed(std::string_view(&c, 1));
    EXPECT_TRUE(tracker.candidate());
  }
}

TEST(BashPromptShapeTest, RecognisesBashsOwnPromptsOnly) {
  EXPECT_TRUE(LooksLikeBashPrompt("root@vm:/tmp#"));
  EXPECT_TRUE(LooksLikeBashPrompt("user@host:~/ws$"));
  EXPECT_TRUE(LooksLikeBashPrompt("(jail)user@host:~$"));
  EXPECT_TRUE(LooksLikeBashPrompt("user@host:/a dir with spaces$"));
  EXPECT_TRUE(LooksLikeBashPrompt("bash-5.2$"));
  EXPECT_TRUE(LooksLikeBashPrompt("sh-5.2#"));
  EXPECT_FALSE(LooksLikeBashPrompt(""));
  EXPECT_TRUE(LooksLikeBashPrompt("$"));
  EXPECT_TRUE(LooksLikeBashPrompt("#"));
  EXPECT_FALSE(LooksLikeBashPrompt(">"));
  EXPECT_FALSE(LooksLikeBashPrompt("Password:"));
  EXPECT_FALSE(LooksLikeBashPrompt("Name: "));
  EXPECT_FALSE(LooksLikeBashPrompt("total $"));
  EXPECT_FALSE(LooksLikeBashPrompt("mail me@host: now$"));
  EXPECT_FALSE(LooksLikeBashPrompt("user@host:~/ws$ ls"));
  EXPECT_FALSE(LooksLikeBashPrompt("user@host:x$"));
  EXPECT_FALSE(LooksLikeBashPrompt("bash-x$"));
  EXPECT_FALSE(LooksLikeBashPrompt("user@host:~\x1b$"));
}

}  // namespace
}  // namespace ptybox::backend
