// The JSON-RPC peer under both servers (runtime/rpc/rpc_peer.h), without a service or a shell:
// a recording handler on one end of a socket pair. Ids in flight and their duplicates,
// cancellation in both dialects, a throwing handler, and the framing bounds.
#include "runtime/rpc/rpc_peer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log.h"
#include "tests/support/error_kind.h"

namespace ptybox::runtime {
namespace {

// Records what the peer hands over; `on_request` may answer, throw or do nothing.
class Recorder final : public RpcHandler {
 public:
  void OnRequest(const RpcMessage& request) override {
    requests.push_back(request);
    if (on_request) on_request(request);
  }
  void OnNotification(const RpcMessage& notification) override {
    notifications.push_back(notification.method);
    if (on_notification) on_notification();
  }
  void OnResponse(const RpcMessage& response, const std::string& line) override {
    responses.push_back(response.id);
    response_lines.push_back(line);
  }
  void OnCancel(const std::string& key, const std::string& reason) override {
    cancels.emplace_back(key, reason);
  }
  void OnDisconnected() override { ++disconnects; }

  std::function<void(const RpcMessage&)> on_request;
  std::function<void()> on_notification;
  std::vector<RpcMessage> requests;
  std::vector<std::string> notifications;
  std::vector<Json> responses;
  std::vector<std::string> response_lines;
  std::vector<std::pair<std::string, std::string>> cancels;
  int disconnects = 0;
};

// A peer on one end of a socket pair; the test is the client on the other.
class PeerHarness {
  // First, so that it is destroyed last: the peer and its connection hold descriptors of it.
  asio::io_context io_;

 public:
  explicit PeerHarness(const RpcDialect& dialect) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    client_ = fds[1];
    ::fcntl(client_, F_SETFL, O_NONBLOCK);
    Result<std::shared_ptr<LineConnection>> line = LineConnection::Create(io_, fds[0], fds[0]);
    EXPECT_TRUE(line.has_value());
    peer = std::make_shared<RpcPeer>(*line, dialect);
    handler = std::make_shared<Recorder>();
    peer->Start(handler);
  }
  ~PeerHarness() {
    if (client_ >= 0) ::close(client_);
  }

  // Writes `bytes` to the peer, running the reactor whenever the socket is full.
  void Write(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(client_, bytes.data() + off, bytes.size() - off);
      if (n > 0) off += static_cast<size_t>(n);
      Run();
    }
    Run();
  }
  void Send(const Json& message) { Write(message.dump() + "\n"); }
  // The peer's lines so far (the reactor run until nothing is ready).
  std::vector<Json> Answers() {
    Run();
    std::vector<Json> out;
    size_t start = 0;
    for (size_t nl = received_.find('\n'); nl != std::string::npos;
         nl = received_.find('\n', start)) {
      out.push_back(Json::parse(received_.substr(start, nl - start)));
      start = nl + 1;
    }
    return out;
  }
  void CloseClient() {
    ::close(client_);
    client_ = -1;
    Run();
  }

  std::shared_ptr<RpcPeer> peer;
  std::shared_ptr<Recorder> handler;

 private:
  void Run() {
    for (int round = 0; round < 64; ++round) {
      io_.restart();
      const size_t ran = io_.poll();
      char buffer[65536];
      ssize_t n = 0;
      while (client_ >= 0 && (n = ::read(client_, buffer, sizeof(buffer))) > 0) {
        received_.append(buffer, static_cast<size_t>(n));
      }
      if (ran == 0 && n <= 0) return;
    }
  }

  int client_ = -1;
  std::string received_;
};

Json Request(const Json& id, const std::string& method = "work") {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", Json::object()}};
}

Json Notification(const std::string& method, const Json& params) {
  return Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}};
}

class RpcPeerDialects : public ::testing::TestWithParam<const RpcDialect*> {};

TEST_P(RpcPeerDialects, ASecondRequestWithAnIdInFlightIsRefusedAndTheFirstKeepsIt) {
  PeerHarness h(*GetParam());
  h.Send(Request(1));
  h.Send(Request(1));
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0]["id"], 1);
  EXPECT_EQ(answers[0]["error"]["code"], -32600);
  EXPECT_NE(answers[0]["error"]["message"].get<std::string>().find("id 1 is already in flight"),
            std::string::npos);
  EXPECT_EQ(h.handler->requests.size(), 1u);
  // The refusal did not free the first: still one request, still refused.
  EXPECT_TRUE(h.peer->InFlight("1"));
  // "1" the string is another id.
  h.Send(Request("1"));
  EXPECT_EQ(h.handler->requests.size(), 2u);
  // Answered, the id is free again, and answered only once.
  h.peer->Reply(1, Json{{"ok", true}});
  h.peer->Reply(1, Json{{"ok", "twice"}});
  h.Send(Request(1));
  answers = h.Answers();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1]["result"]["ok"], true);
  EXPECT_EQ(h.handler->requests.size(), 3u);
}

TEST_P(RpcPeerDialects, AThrowingHandlerIsAnsweredInternalErrorWithItsIdAndTheIdIsFreed) {
  PeerHarness h(*GetParam());
  h.handler->on_request = [](const RpcMessage& r) {
    if (r.method == "boom") throw std::runtime_error("a bug");
  };
  h.Send(Request(3, "boom"));
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0]["id"], 3);
  EXPECT_EQ(answers[0]["error"]["code"], RpcPeer::kInternalError);
  EXPECT_EQ(answers[0]["error"]["message"], "internal error: a bug");
  EXPECT_FALSE(h.peer->InFlight("3"));
  // The connection goes on: the same id is a new request.
  h.Send(Request(3, "work"));
  EXPECT_EQ(h.handler->requests.size(), 2u);
  EXPECT_TRUE(h.peer->InFlight("3"));
}

TEST_P(RpcPeerDialects, AHandlerThatAnsweredThenThrewIsNotAnsweredTwice) {
  PeerHarness h(*GetParam());
  std::shared_ptr<RpcPeer> peer = h.peer;
  h.handler->on_request = [peer](const RpcMessage& r) {
    peer->Reply(r.id, Json{{"done", true}});
    throw std::logic_error("after the answer");
  };
  h.Send(Request(4));
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0]["result"]["done"], true);
}

TEST_P(RpcPeerDialects, AThrowingNotificationHandlerIsContainedAndAnswersNothing) {
  PeerHarness h(*GetParam());
  h.handler->on_notification = [] { throw std::runtime_error("notification bug"); };
  h.Send(Notification("something/else", Json::object()));
  h.Send(Request(5));
  EXPECT_TRUE(h.Answers().empty());
  EXPECT_EQ(h.handler->notifications, std::vector<std::string>{"something/else"});
  EXPECT_EQ(h.handler->requests.size(), 1u);
}

TEST_P(RpcPeerDialects, ALineOverTheBoundIsRefusedBeforeParsingAndTheNextIsServed) {
  PeerHarness h(*GetParam());
  h.Write(std::string(LineConnection::kMaxLineBytes + 10, 'x') + "\n");
  h.Send(Request(6));
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0]["id"].is_null());
  EXPECT_EQ(answers[0]["error"]["code"], -32600);
  EXPECT_EQ(answers[0]["error"]["message"], kOversizedLineMessage);
  ASSERT_EQ(h.handler->requests.size(), 1u);
  EXPECT_EQ(h.handler->requests[0].id, 6);
}

TEST_P(RpcPeerDialects, MalformedLinesAreRefusedWithoutReachingTheHandler) {
  PeerHarness h(*GetParam());
  h.Write("{not json\n");
  h.Write(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']') + "\n");
  h.Write("\n   \n");  // blank lines are ignored
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0]["error"]["code"], -32700);
  EXPECT_EQ(answers[1]["error"]["code"], -32600);
  EXPECT_NE(answers[1]["error"]["message"].get<std::string>().find("nested deeper"),
            std::string::npos);
  EXPECT_TRUE(h.handler->requests.empty());
}

TEST_P(RpcPeerDialects, ResponsesAndTheEndOfInputReachTheHandler) {
  PeerHarness h(*GetParam());
  const Json response{{"jsonrpc", "2.0"}, {"id", "ask-1"}, {"result", {{"action", "accept"}}}};
  h.Send(response);
  ASSERT_EQ(h.handler->responses.size(), 1u);
  EXPECT_EQ(h.handler->responses[0], "ask-1");
  EXPECT_EQ(Json::parse(h.handler->response_lines[0]), response);
  h.CloseClient();
  EXPECT_EQ(h.handler->disconnects, 1);
}

INSTANTIATE_TEST_SUITE_P(Dialects, RpcPeerDialects,
                         ::testing::Values(&kJsonRpcDialect, &kMcpDialect),
                         [](const auto& test) { return std::string(test.param->name); });

// The dialect's cancel notification, with a reason of `reason_bytes`.
Json Cancel(const RpcDialect& dialect, const Json& id, const std::string& reason) {
  return Notification(std::string(dialect.cancel_method),
                      Json{{std::string(dialect.cancel_id_key), id}, {"reason", reason}});
}

TEST(RpcPeerCancel, JsonRpcCancelReachesTheHandlerBoundedAndTheRequestIsStillAnswered) {
  PeerHarness h(kJsonRpcDialect);
  h.Send(Request(7));
  h.Send(Cancel(kJsonRpcDialect, 7, std::string(5000, 'r')));
  ASSERT_EQ(h.handler->cancels.size(), 1u);
  EXPECT_EQ(h.handler->cancels[0].first, "7");
  const std::string& reason = h.handler->cancels[0].second;
  EXPECT_LE(reason.size(), kMaxReasonBytes + 32);
  EXPECT_TRUE(reason.ends_with("(5000 bytes)")) << reason.substr(reason.size() - 40);
  h.peer->ReplyError(7, Error{ErrorKind::kCanceled, reason, ""});
  std::vector<Json> answers = h.Answers();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_ERROR_KIND(answers[0], ErrorKind::kCanceled);
}

TEST(RpcPeerCancel, McpCancelReachesTheHandlerBoundedAndTheRequestGetsNoAnswer) {
  PeerHarness h(kMcpDialect);
  h.Send(Request(8));
  h.Send(Cancel(kMcpDialect, 8, std::string(70000, 'm')));
  ASSERT_EQ(h.handler->cancels.size(), 1u);
  EXPECT_EQ(h.handler->cancels[0].first, "8");
  EXPECT_LE(h.handler->cancels[0].second.size(), kMaxReasonBytes + 32);
  EXPECT_FALSE(h.peer->Answerable("8"));
  h.peer->Reply(8, Json{{"late", true}});
  EXPECT_TRUE(h.Answers().empty());
  // The id is free again.
  h.Send(Request(8));
  EXPECT_EQ(h.handler->requests.size(), 2u);
}

TEST(RpcPeerCancel, UnknownMalformedAndOtherDialectCancelsAreIgnored) {
  PeerHarness h(kJsonRpcDialect);
  h.Send(Request(9));
  h.Send(Cancel(kJsonRpcDialect, 10, "no such request"));
  h.Send(Notification("$/cancelRequest", Json{{"requestId", 9}}));  // the MCP key
  h.Send(Notification("$/cancelRequest", Json::object()));
  h.Send(Cancel(kMcpDialect, 9, "the other dialect"));  // an ordinary notification here
  EXPECT_TRUE(h.handler->cancels.empty());
  EXPECT_EQ(h.handler->notifications, std::vector<std::string>{"notifications/cancelled"});
  h.Send(Cancel(kJsonRpcDialect, 9, ""));
  ASSERT_EQ(h.handler->cancels.size(), 1u);
  EXPECT_TRUE(h.Answers().empty());
}

TEST(RpcPeerCancel, TheReasonIsLoggedEscapedAndShortNeverWhole) {
  PeerHarness h(kMcpDialect);
  h.Send(Request(11));
  // The log is standard error: caught in a file for this one message.
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(log), STDERR_FILENO);
  SetLogLevel(LogLevel::kInfo);
  h.Send(Cancel(kMcpDialect, 11, "first\nptybox: error: forged line " + std::string(50000, 'z')));
  SetLogLevel(LogLevel::kWarn);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text(1 << 20, '\0');
  std::rewind(log);
  text.resize(std::fread(text.data(), 1, text.size(), log));
  std::fclose(log);
  ASSERT_EQ(h.handler->cancels.size(), 1u);
  EXPECT_NE(text.find("canceled: first\\nptybox: error: forged"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nptybox: error: forged"), std::string::npos) << text;
  EXPECT_LT(text.size(), 1024u) << "the whole reason was logged";
}

}  // namespace
}  // namespace ptybox::runtime
