// The contract table (runtime/methods.h): validation derived from each entry refuses unknown
// keys, wrong types and values out of bounds with -32602 messages that name the method and the
// parameter; defaults are filled in; the MCP input schemas are derived from the same entries.
#include "runtime/methods.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backend/contract_types.h"
#include "policy/mode.h"
#include "runtime/mcp/tool_schemas.h"
#include "runtime/mcp_tools.h"
#include "runtime/params.h"

namespace ptybox::runtime {
namespace {

const MethodSpec& Method(std::string_view name) {
  const MethodSpec* spec = FindMethod(name);
  EXPECT_NE(spec, nullptr) << name;
  return *spec;
}

// The -32602 message for `params` sent to `method`.
std::string Refusal(std::string_view method, const Json& params) {
  Result<Args> args = ValidateParams(Method(method), params);
  EXPECT_FALSE(args.has_value()) << method << " " << params.dump();
  if (args) return {};
  EXPECT_EQ(args.error().kind, ErrorKind::kInvalidParams);
  EXPECT_EQ(ErrorObject(args.error())["code"], -32602);
  return args.error().message;
}

TEST(ContractTableTest, EveryMethodOfTheContractIsOneEntryWithAHandlerAndAnMcpTool) {
  const std::vector<std::string> expected = {
      "terminal_open", "terminal_send",   "terminal_output", "terminal_cancel",
      "terminal_read", "terminal_signal", "terminal_status", "terminal_close",
      "terminal_list", "policy_resolve",  "policy_set_mode", "terminal_resize"};
  for (const std::string& name : expected) {
    const MethodSpec* spec = FindMethod(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_NE(spec->handler, nullptr) << name;
    EXPECT_FALSE(spec->summary.empty()) << name;
    const McpTool* tool = FindMcpTool(name);
    ASSERT_NE(tool, nullptr) << name << " has no MCP tool";
    // The tool's input schema lists exactly the entry's params.
    std::vector<std::string> properties;
    for (const auto& [key, value] : tool->input_schema["properties"].items()) {
      properties.push_back(key);
    }
    std::vector<std::string> params;
    for (const ParamSpec& param : spec->params) params.push_back(param.name);
    std::sort(params.begin(), params.end());
    EXPECT_EQ(properties, params) << name;
    EXPECT_EQ(tool->input_schema["additionalProperties"], false) << name;
  }
  for (const McpTool& tool : McpTools()) {
    EXPECT_TRUE(IsContractMethod(tool.name)) << tool.name << " is a tool but no method";
  }
  EXPECT_FALSE(IsContractMethod("no_such_method"));
}

TEST(ContractTableTest, UnknownKeysAreRefusedListingTheAcceptedOnes) {
  EXPECT_EQ(Refusal("terminal_open", Json{{"colums", 80}}),
            "terminal_open: unknown parameter \"colums\" (accepted: type, name, cwd, cols, rows, "
            "env, timeoutMs)");
  EXPECT_EQ(Refusal("terminal_list", Json{{"all", true}}),
            "terminal_list: unknown parameter \"all\" (accepted: none)");
}

TEST(ContractTableTest, TypesAndBoundsAreCheckedNamingTheParam) {
  EXPECT_EQ(Refusal("terminal_open", Json{{"cols", "wide"}}),
            "terminal_open: \"cols\" must be an integer");
  EXPECT_EQ(Refusal("terminal_open", Json{{"cols", 1}}),
            "terminal_open: \"cols\" must be between 2 and 1000");
  EXPECT_EQ(Refusal("terminal_open", Json{{"rows", 501}}),
            "terminal_open: \"rows\" must be between 2 and 500");
  EXPECT_EQ(
      Refusal("terminal_send",
              Json{{"sessionId", "pty-1"}, {"input", "x"}, {"timeoutMs", 24LL * 3600 * 1000 + 1}}),
      "terminal_send: \"timeoutMs\" must be between 1 and 86400000");
  EXPECT_EQ(Refusal("terminal_send", Json{{"sessionId", "pty-1"}}),
            "terminal_send: give exactly one of \"input\" or \"keys\" (none was given)");
  EXPECT_EQ(
      Refusal("terminal_send", Json{{"sessionId", "pty-1"}, {"input", "x"}, {"keys", {"Up"}}}),
      "terminal_send: give exactly one of \"input\" or \"keys\" (not both)");
  EXPECT_EQ(Refusal("terminal_send", Json{{"sessionId", "pty-1"}, {"keys", Json::array()}}),
            "terminal_send: \"keys\" must be a non-empty list of strings");
  EXPECT_EQ(Refusal("terminal_send", Json{{"sessionId", "pty-1"}, {"keys", {"Up", 7}}}),
            "terminal_send: \"keys[1]\" must be a string");
  EXPECT_EQ(Refusal("terminal_send", Json{{"sessionId", "pty-1"},
                                          {"keys", Json(std::vector<std::string>(1025, "a"))}}),
            "terminal_send: \"keys\" has 1025 entries; the maximum is 1024");
  EXPECT_EQ(Refusal("terminal_resize", Json{{"sessionId", "pty-1"}, {"cols", 80}}),
            "terminal_resize: \"rows\" (an integer from 2 to 500) is required");
  EXPECT_EQ(Refusal("terminal_resize", Json{{"sessionId", "pty-1"}, {"cols", 1001}, {"rows", 9}}),
            "terminal_resize: \"cols\" must be between 2 and 1000");
  EXPECT_EQ(
      Refusal("terminal_send", Json{{"sessionId", "pty-1"}, {"input", "x"}, {"background", "yes"}}),
      "terminal_send: \"background\" must be true or false");
  EXPECT_EQ(Refusal("terminal_read", Json{{"sessionId", "pty-1"}, {"maxBytes", 0}}),
            "terminal_read: \"maxBytes\" must be between 1 and 9223372036854775807");
  EXPECT_EQ(Refusal("terminal_close", Json{{"sessionId", 7}}),
            "terminal_close: \"sessionId\" (a string) is required");
  EXPECT_EQ(Refusal("terminal_open", Json{{"name", std::string(257, 'n')}}),
            "terminal_open: \"name\" is 257 bytes; the maximum is 256 bytes");
  EXPECT_TRUE(
      Refusal("terminal_open", Json{{"env", Json{{"SHELLOPTS", "xtrace"}}}}).starts_with("env: "));
}

TEST(ContractTableTest, EnumsComeFromTheirOneList) {
  EXPECT_EQ(Refusal("policy_set_mode", Json{{"mode", "yolo"}}),
            "policy_set_mode: unknown mode \"yolo\" (read-only, workspace-write or "
            "danger-full-access)");
  EXPECT_EQ(Refusal("terminal_signal", Json{{"sessionId", "pty-1"}, {"signal", "SIGUSR1"}}),
            "terminal_signal: unknown signal \"SIGUSR1\" (SIGINT, SIGTERM, SIGKILL, SIGQUIT, "
            "SIGHUP, SIGTSTP or SIGCONT)");
  EXPECT_EQ(Refusal("terminal_read", Json{{"sessionId", "pty-1"}, {"view", "pixels"}}),
            "terminal_read: unknown view \"pixels\" (lines or screen)");
  const McpTool* signal = FindMcpTool("terminal_signal");
  ASSERT_NE(signal, nullptr);
  EXPECT_EQ(signal->input_schema["properties"]["signal"]["enum"],
            Json(backend::ClientSignalNames()));
  const McpTool* mode = FindMcpTool("policy_set_mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->input_schema["properties"]["mode"]["enum"],
            Json::array({"read-only", "workspace-write", "danger-full-access"}));
  // A send's wait reasons are the one table's (backend/contract_types.h), in its order.
  EXPECT_EQ(SendResultSchema()["properties"]["waitReason"]["enum"],
            Json::array({"stdin_read", "inferred_idle", "timeout", "session_exit", "pattern"}));
  EXPECT_EQ(SendResultSchema()["properties"]["waitReason"]["enum"],
            Json(backend::WaitReasonNames()));
}

TEST(ContractTableTest, DefaultsAreFilledInAndStatedInTheSchema) {
  Result<Args> open = ValidateParams(Method("terminal_open"), nullptr);
  ASSERT_TRUE(open.has_value()) << open.error().message;
  EXPECT_EQ(open->Int("cols"), 120);
  EXPECT_EQ(open->Int("rows"), 40);
  EXPECT_EQ(open->String("type"), "shell");
  EXPECT_FALSE(open->Int("timeoutMs").has_value()) << "the policy's default applies";
  const McpTool* tool = FindMcpTool("terminal_open");
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ(tool->input_schema["properties"]["cols"]["default"], 120);
  EXPECT_EQ(tool->input_schema["properties"]["cols"]["minimum"], 2);
  EXPECT_EQ(tool->input_schema["properties"]["cols"]["maximum"], 1000);
  EXPECT_EQ(tool->input_schema["properties"]["rows"]["maximum"], 500);
  Result<Args> close = ValidateParams(Method("terminal_close"), Json{{"sessionId", "pty-1"}});
  ASSERT_TRUE(close.has_value());
  EXPECT_EQ(close->String("reason"), "closed by the client");
}

}  // namespace
}  // namespace ptybox::runtime

namespace ptybox::runtime {
namespace {

// The message CheckContract gives for `table`, or "" when it accepts it.
std::string TableProblem(const std::vector<MethodSpec>& table) {
  Result<void> checked = CheckContract(table);
  return checked ? std::string() : checked.error().message;
}

std::vector<MethodSpec> ContractWithout(std::string_view name) {
  std::vector<MethodSpec> table = Contract();
  std::erase_if(table, [&](const MethodSpec& method) { return method.name == name; });
  return table;
}

MethodSpec& Entry(std::vector<MethodSpec>& table, std::string_view name) {
  return *std::find_if(table.begin(), table.end(),
                       [&](const MethodSpec& method) { return method.name == name; });
}

TEST(ContractCheckTest, TheContractIsWholeAndEveryToolRendersThroughItsEntry) {
  EXPECT_EQ(TableProblem(Contract()), "");
  for (const McpTool& tool : McpTools()) {
    const MethodSpec* method = FindMethod(tool.name);
    ASSERT_NE(method, nullptr) << tool.name;
    ASSERT_TRUE(method->mcp.has_value()) << tool.name;
    EXPECT_EQ(tool.title, method->mcp->title);
    EXPECT_EQ(tool.description, method->mcp->description);
  }
  // A table without the method is a message, not a crash.
  EXPECT_EQ(RenderToolResult("no_such_tool", Json{{"a", 1}}), R"({"a":1})");
  EXPECT_EQ(RenderToolResult("terminal_resize", Json{{"cols", 80}, {"rows", 24}}),
            "Resized the terminal to 80 columns and 24 rows.");
}

TEST(ContractCheckTest, AMethodTheServersNameIsRequiredWithAMessage) {
  EXPECT_EQ(TableProblem(ContractWithout("owner_attach")),
            "the contract table (runtime/methods.cc) is broken: owner_attach: missing, and the "
            "servers call it by name");
  std::vector<MethodSpec> table = Contract();
  Entry(table, "terminal_read").mcp.reset();
  EXPECT_EQ(TableProblem(table),
            "the contract table (runtime/methods.cc) is broken: terminal_read: no MCP face, and "
            "ptybox mcp calls it by name");
}

// What the MCP server needs of a method is a field of its face, not a name in its code.
TEST(ContractCheckTest, ConsentBudgetsAndPolicyChangesAreFieldsOfTheFaces) {
  std::vector<std::string> consent;
  std::vector<std::string> policy;
  std::vector<std::string> located;
  for (const MethodSpec& method : Contract()) {
    if (!method.mcp) continue;
    if (method.mcp->needs_consent) consent.push_back(method.name);
    if (method.mcp->changes_policy) policy.push_back(method.name);
    if (const BoundedText* text = method.mcp->budget.Located()) {
      located.push_back(method.name + ":" + text->field);
    }
  }
  EXPECT_EQ(consent, std::vector<std::string>{"policy_set_mode"});
  EXPECT_EQ(policy, std::vector<std::string>{"policy_set_mode"});
  EXPECT_EQ(located, (std::vector<std::string>{"terminal_send:viewport", "terminal_wait:viewport",
                                               "terminal_output:output", "terminal_read:text"}));
  EXPECT_EQ(FindMcpFace("terminal_read")->budget.Located()->place, TextPlace::kPage);
  EXPECT_EQ(FindMcpFace("terminal_output")->budget.Located()->place, TextPlace::kCollected);
  EXPECT_EQ(FindMcpFace("terminal_open")->budget.texts.front().field, "motd");
  EXPECT_EQ(FindMcpFace("owner_info"), nullptr);
  EXPECT_EQ(FindMcpFace("no_such_tool"), nullptr);
}

// The message CheckContract gives for the contract after `edit`.
template <typename Edit>
std::string ProblemAfter(Edit edit) {
  std::vector<MethodSpec> table = Contract();
  edit(table);
  return TableProblem(table);
}

TEST(ContractCheckTest, FaceFactsThatTheParamsCannotBearAreRefused) {
  const std::string broken = "the contract table (runtime/methods.cc) is broken: ";
  EXPECT_EQ(ProblemAfter([](std::vector<MethodSpec>& table) {
              Entry(table, "terminal_list").mcp->needs_consent = true;
            }),
            broken + "terminal_list: its MCP face needs consent, and it takes no \"mode\"");
  EXPECT_EQ(ProblemAfter([](std::vector<MethodSpec>& table) {
              Entry(table, "terminal_output").mcp->budget.texts[0].place = TextPlace::kPage;
            }),
            broken +
                "terminal_output: its budget pages \"output\", and it takes no integer "
                "\"maxBytes\"");
  EXPECT_EQ(ProblemAfter([](std::vector<MethodSpec>& table) {
              Entry(table, "terminal_output").mcp->budget.texts[1].place =
                  TextPlace::kScrollbackEnd;
            }),
            broken +
                "terminal_output: its budget locates \"viewport\" inside \"result\"; only "
                "a field of the result itself is located");
  EXPECT_EQ(ProblemAfter([](std::vector<MethodSpec>& table) {
              Entry(table, "terminal_send")
                  .mcp->budget.texts.push_back(
                      BoundedText{.field = "cwd", .place = TextPlace::kScrollbackEnd});
            }),
            broken + "terminal_send: its budget locates more than one text");
}

TEST(ContractCheckTest, BrokenEntriesAreNamed) {
  std::vector<MethodSpec> twice = Contract();
  twice.push_back(Contract().front());
  EXPECT_NE(TableProblem(twice).find("terminal_open: listed twice"), std::string::npos);

  std::vector<MethodSpec> no_render = Contract();
  Entry(no_render, "terminal_read").mcp->render = nullptr;
  EXPECT_NE(TableProblem(no_render).find("terminal_read: its MCP face has no renderer"),
            std::string::npos);

  std::vector<MethodSpec> bad_rule = Contract();
  Entry(bad_rule, "terminal_send").exactly_one_of = {"input", "keyz"};
  EXPECT_NE(TableProblem(bad_rule).find("exactly_one_of names \"keyz\""), std::string::npos);

  std::vector<MethodSpec> no_handler = Contract();
  Entry(no_handler, "terminal_list").handler = nullptr;
  EXPECT_NE(TableProblem(no_handler).find("terminal_list: no handler"), std::string::npos);

  std::vector<MethodSpec> empty_enum = Contract();
  Entry(empty_enum, "policy_set_mode").params[0].values.clear();
  EXPECT_NE(TableProblem(empty_enum).find("enum \"mode\" has no values"), std::string::npos);
}

TEST(ContractCheckTest, TerminalSendListsEveryKeyOnceFromTheEncodersTable) {
  const std::string& description = FindMcpTool("terminal_send")->description;
  for (const char* name :
       {" Enter ", " BTab ", " Insert ", " Delete ", " PageUp ", " PageDown ", " F1-F12,"}) {
    EXPECT_NE(description.find(name), std::string::npos) << name;
  }
  // tmux's second names for the same keys are left out.
  for (const char* alias : {" IC ", " DC ", " PPage ", " NPage "}) {
    EXPECT_EQ(description.find(alias), std::string::npos) << alias;
  }
}

}  // namespace
}  // namespace ptybox::runtime
