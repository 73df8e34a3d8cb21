// The pure rules of model consent (runtime/mcp/mcp_consent.h): which modes need the user, which
// hosts can be asked, and how each answer reads. mcp_consent_test.cc drives the same through the
// real binary.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/mcp/mcp_consent.h"

namespace ptybox::runtime {
namespace {

using policy::Mode;

TEST(McpConsentRulesTest, OnlyAModeWiderThanTheFreeOneNeedsConsent) {
  const Mode modes[] = {Mode::kReadOnly, Mode::kWorkspaceWrite, Mode::kDangerFullAccess};
  for (Mode free : modes) {
    for (Mode requested : modes) {
      EXPECT_EQ(NeedsConsent(requested, free), static_cast<int>(requested) > static_cast<int>(free))
          << policy::ToString(requested) << " with " << policy::ToString(free) << " free";
    }
  }
}

TEST(McpConsentRulesTest, FormElicitationIsDeclaredInAVersionThatHasIt) {
  const Json empty{{"elicitation", Json::object()}};
  EXPECT_TRUE(CanElicitForm(empty, "2025-11-25"));
  EXPECT_TRUE(CanElicitForm(empty, "2025-06-18"));
  EXPECT_FALSE(CanElicitForm(empty, "2025-03-26"));
  EXPECT_FALSE(CanElicitForm(empty, "2024-11-05"));
  EXPECT_TRUE(CanElicitForm(Json{{"elicitation", {{"form", Json::object()}}}}, "2025-11-25"));
  EXPECT_TRUE(CanElicitForm(
      Json{{"elicitation", {{"form", Json::object()}, {"url", Json::object()}}}}, "2025-11-25"));
  EXPECT_FALSE(CanElicitForm(Json{{"elicitation", {{"url", Json::object()}}}}, "2025-11-25"));
  EXPECT_FALSE(CanElicitForm(Json::object(), "2025-11-25"));
  EXPECT_FALSE(CanElicitForm(Json{{"elicitation", true}}, "2025-11-25"));
  EXPECT_FALSE(CanElicitForm(Json{{"sampling", Json::object()}}, "2025-11-25"));
  EXPECT_FALSE(CanElicitForm(Json("elicitation"), "2025-11-25"));
}

TEST(McpConsentRulesTest, OnlyAnAcceptIsConsent) {
  auto answer = [](Json result) { return Json{{"jsonrpc", "2.0"}, {"id", 1}, {"result", result}}; };
  EXPECT_EQ(ConsentRefusal(answer({{"action", "accept"}})), std::nullopt);
  EXPECT_EQ(ConsentRefusal(answer({{"action", "accept"}, {"content", {{"x", 1}}}})), std::nullopt);
  EXPECT_EQ(ConsentRefusal(answer({{"action", "decline"}})), "the user declined it");
  EXPECT_NE(ConsentRefusal(answer({{"action", "cancel"}})), std::nullopt);
  EXPECT_NE(ConsentRefusal(answer({{"action", "ACCEPT"}})), std::nullopt);
  EXPECT_NE(ConsentRefusal(answer({{"action", true}})), std::nullopt);
  EXPECT_NE(ConsentRefusal(answer(Json::object())), std::nullopt);
  EXPECT_NE(ConsentRefusal(answer("accept")), std::nullopt);
  EXPECT_NE(ConsentRefusal(Json{{"jsonrpc", "2.0"}, {"id", 1}}), std::nullopt);
  EXPECT_EQ(ConsentRefusal(Json{{"jsonrpc", "2.0"},
                                {"id", 1},
                                {
                                    "error",
                                    {{"code", -1}, {"message", "no UI"}},
                                },
                                {"result", {{"action", "accept"}}}}),
            "the host could not ask the user (no UI)")
      << "an error wins over a result beside it";
}

TEST(McpConsentRulesTest, TheQuestionNamesBothModesAndWhatTheWiderOneAllows) {
  policy::ResolvedPolicy current;
  current.mode = Mode::kReadOnly;
  current.workspace_root = "/ws";
  policy::ResolvedPolicy wanted = current;
  wanted.mode = Mode::kWorkspaceWrite;
  wanted.writable_roots = {"/cache"};
  wanted.network_allowed = true;
  Json params = ConsentRequestParams(current, wanted, "2025-11-25");
  const std::string message = params["message"];
  EXPECT_NE(message.find("from read-only to workspace-write"), std::string::npos) << message;
  EXPECT_NE(message.find("Now: read-only mode; writable: only a private /tmp"), std::string::npos)
      << message;
  EXPECT_NE(message.find("Requested: workspace-write mode; writable: \"/ws\", \"/cache\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("network allowed"), std::string::npos) << message;
  EXPECT_EQ(params["mode"], "form");
  EXPECT_EQ(params["requestedSchema"], Json({{"type", "object"}, {"properties", Json::object()}}));
  EXPECT_FALSE(ConsentRequestParams(current, wanted, "2025-06-18").contains("mode"));
}

TEST(McpConsentRulesTest, AHostileDirectoryNameCannotPoseAsPartOfTheQuestion) {
  // A checked-in directory listed under `writable:` whose name imitates the question.
  const std::string hostile =
      "/ws/cache\n\nNOTE: the sandbox is unchanged.\nRequested: read-only "
      "mode. Accept to keep the sandbox" +
      std::string(60, '\n') + "\u202e";
  policy::ResolvedPolicy current;
  current.mode = Mode::kReadOnly;
  current.workspace_root = "/ws";
  policy::ResolvedPolicy wanted = current;
  wanted.mode = Mode::kWorkspaceWrite;
  wanted.writable_roots = {hostile};
  const std::string message = ConsentRequestParams(current, wanted, "2025-11-25")["message"];
  // The request and the choice first; exactly two more lines, Now and Requested.
  EXPECT_TRUE(
      message.starts_with("The AI model asks to widen the sandbox of the terminals it "
                          "opens from now on, from read-only to workspace-write. Accept "
                          "to allow workspace-write for this connection; decline to keep "
                          "read-only.\nNow: "))
      << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 2) << message;
  EXPECT_NE(message.find("\"/ws/cache\\n\\nNOTE: the sandbox is unchanged.\\nRequested: "
                         "read-only mode. Accept to keep the sandbox\\n"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("\u202e"), std::string::npos) << "the bidi override is shown escaped";
  EXPECT_LT(message.size(), 1024u) << "each name is bounded";
}

TEST(McpConsentRulesTest, RefusalsSayWhatToDoNext) {
  const Error unavailable = ConsentUnavailable(Mode::kReadOnly, Mode::kDangerFullAccess);
  EXPECT_EQ(unavailable.kind, ErrorKind::kPolicyDenied);
  EXPECT_NE(unavailable.message.find("cannot ask the user"), std::string::npos);
  const Error refused = ConsentRefused(Mode::kWorkspaceWrite, Mode::kDangerFullAccess, "why");
  EXPECT_EQ(refused.kind, ErrorKind::kPolicyDenied);
  for (const Error& e : {unavailable, refused}) {
    EXPECT_NE(e.message.find("Continue within"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("`--mode danger-full-access`"), std::string::npos) << e.message;
  }
  EXPECT_NE(refused.message.find("and why."), std::string::npos) << refused.message;
}

}  // namespace
}  // namespace ptybox::runtime
