// PtyService's own rules with a fake backend (no bash, no bwrap, no daemon): names, per-owner
// and daemon limits, cancel during open, the mode fence, close, detach and attach, shutdown.
// The fake answers spawns and closes when a test says so, and the detach grace runs on an
// injected timer the test fires, so every ordering is reached on purpose; the reactor only
// runs the handlers already posted, and nothing waits on time.
#include "runtime/service.h"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/owner.h"
#include "tests/support/temp_dir.h"

namespace ptybox::runtime {
namespace {

using backend::BackendSession;
using backend::SessionStatus;
using ::ptybox::testing::TempDir;

// A session that never runs anything; Close answers at once unless `hold_close`.
class FakeSession final : public BackendSession {
 public:
  FakeSession(asio::io_context& io, policy::ResolvedPolicy policy, bool hold_close)
      : io_(io), policy_(std::move(policy)), hold_close_(hold_close) {}

  [[nodiscard]] const std::string& motd() const override { return motd_; }
  [[nodiscard]] std::optional<pid_t> pid() const override { return 4242; }
  Result<std::shared_ptr<backend::SendOperation>> StartSend(backend::SendRequest) override {
    return Fail(ErrorKind::kBusy, "the fake runs no sends");
  }
  [[nodiscard]] std::shared_ptr<backend::SendOperation> last_send() const override {
    return nullptr;
  }
  [[nodiscard]] bool busy() const override { return false; }
  [[nodiscard]] const policy::ResolvedPolicy& policy() const override { return policy_; }
  [[nodiscard]] backend::ReadResult Read(const backend::ReadRequest&) const override {
    return backend::ReadResult{.text = "fake screen"};
  }
  [[nodiscard]] std::optional<backend::ScreenSnapshot> Snapshot() const override {
    return backend::ScreenSnapshot{.rows = 1, .columns = 20, .lines = {"fake screen"}};
  }
  Result<void> WriteTyped(std::string bytes) override {
    typed += bytes;
    return {};
  }
  std::string typed;
  Result<void> Resize(int rows, int columns) override {
    size_ = {rows, columns};
    return {};
  }
  void Signal(int, std::function<void(Result<backend::SignalResult>)> done) override {
    asio::post(io_, [done] { done(backend::SignalResult{.delivered = true, .pgid = 4242}); });
  }
  [[nodiscard]] SessionStatus Status() const override {
    SessionStatus status;
    status.exited = closed_;
    return status;
  }
  void Close(std::string reason, std::function<void(Result<SessionStatus>)> done) override {
    close_reasons.push_back(std::move(reason));
    if (hold_close_) {
      held_close_ = std::move(done);
      return;
    }
    Finish(std::move(done));
  }
  // Ends a held close (its processes are gone).
  void ReleaseClose() {
    ASSERT_TRUE(held_close_) << "no close is held";
    Finish(std::move(held_close_));
    held_close_ = nullptr;
  }

  std::vector<std::string> close_reasons;
  std::pair<int, int> size_{0, 0};

 private:
  void Finish(std::function<void(Result<SessionStatus>)> done) {
    closed_ = true;
    asio::post(io_, [done, status = Status()] { done(status); });
  }

  asio::io_context& io_;
  policy::ResolvedPolicy policy_;
  bool hold_close_;
  bool closed_ = false;
  std::string motd_ = "fake motd";
  std::function<void(Result<SessionStatus>)> held_close_;
};

class FakeBackend;

// One spawn as the fake backend saw it.
struct FakeSpawn {
  backend::SpawnSpec spec;
  backend::Backend::SpawnCallback done;
  std::optional<std::string> cancel_reason;
  bool answered = false;
};

class FakePending final : public backend::PendingSpawn {
 public:
  FakePending(FakeBackend& backend, size_t index) : backend_(backend), index_(index) {}
  void Cancel(std::string reason) override;

 private:
  FakeBackend& backend_;
  size_t index_;
};

// Spawns answer at once (posted, as a real backend's do) unless `answer_at_once` is off; a
// cancel fails its spawn unless `cancel_answers` is off.
class FakeBackend final : public backend::Backend {
 public:
  explicit FakeBackend(asio::io_context& io) : io_(io) {}
  [[nodiscard]] std::string_view type() const override { return "shell"; }
  std::shared_ptr<backend::PendingSpawn> Spawn(backend::SpawnSpec spec,
                                               SpawnCallback done) override {
    auto spawn = std::make_unique<FakeSpawn>();
    spawn->spec = std::move(spec);
    spawn->done = std::move(done);
    spawns.push_back(std::move(spawn));
    const size_t index = spawns.size() - 1;
    if (answer_at_once) Succeed(index);
    return std::make_shared<FakePending>(*this, index);
  }
  void Shutdown(std::function<void()> done) override {
    ++shutdowns;
    asio::post(io_, std::move(done));
  }

  // Answers spawn `index` with a new session.
  void Succeed(size_t index) {
    auto session = std::make_shared<FakeSession>(io_, spawns[index]->spec.policy, hold_close);
    sessions.push_back(session);
    Answer(index, session);
  }
  void FailSpawn(size_t index, Error error) { Answer(index, std::unexpected(std::move(error))); }
  void Canceled(size_t index, std::string reason) {
    spawns[index]->cancel_reason = reason;
    if (cancel_answers) FailSpawn(index, Error{ErrorKind::kCanceled, std::move(reason)});
  }

  bool answer_at_once = true;
  bool cancel_answers = true;
  bool hold_close = false;
  int shutdowns = 0;
  std::vector<std::unique_ptr<FakeSpawn>> spawns;
  std::vector<std::shared_ptr<FakeSession>> sessions;

 private:
  void Answer(size_t index, Result<std::shared_ptr<BackendSession>> result) {
    FakeSpawn& spawn = *spawns[index];
    ASSERT_FALSE(spawn.answered) << "spawn " << index << " answered twice";
    spawn.answered = true;
    asio::post(io_, [done = spawn.done, result = std::move(result)] { done(result); });
  }
  asio::io_context& io_;
};

void FakePending::Cancel(std::string reason) { backend_.Canceled(index_, std::move(reason)); }

// A timer the service started; fired by the test. Alive while the service holds its handle.
struct FakeTimer {
  std::chrono::milliseconds delay{0};
  std::function<void()> fire;
  std::weak_ptr<void> handle;
};

class ServiceTest : public ::testing::Test {
 protected:
  // The operator policy is this test's own file: /etc/ptybox is never read.
  void Start(const std::string& limits = "{}", size_t max_total = kDefaultMaxTotalSessions) {
    ServiceOptions options;
    options.operator_policy = dir_.File("operator.yaml", "version: 1\nlimits: " + limits + "\n");
    options.default_operator_policy = dir_.path() / "absent.yaml";
    options.workspace = dir_.Dir("ws");
    options.workspace_from_cli = true;
    options.max_total_sessions = max_total;
    service_ = std::make_unique<PtyService>(
        io_, std::move(options),
        [this](auto headroom) {
          headroom_ = std::move(headroom);
          auto fake = std::make_unique<FakeBackend>(io_);
          fake_ = fake.get();
          Backends backends;
          backends.emplace("shell", std::move(fake));
          return backends;
        },
        [this](std::chrono::milliseconds delay, std::function<void()> fire) {
          auto handle = std::make_shared<int>(0);
          timers_.push_back(FakeTimer{delay, std::move(fire), handle});
          return std::shared_ptr<void>(handle);
        });
  }

  // Runs every handler that is ready, and those they post, until none is left.
  void Drain() {
    for (int i = 0; i < 10000; ++i) {
      io_.restart();
      if (io_.poll() == 0) return;
    }
    ADD_FAILURE() << "the reactor never ran dry";
  }

  // Starts terminal_open; the answer lands in the returned slot once the reactor ran.
  std::shared_ptr<std::optional<Result<OpenResult>>> StartOpen(const std::shared_ptr<Owner>& owner,
                                                               std::optional<std::string> name,
                                                               const std::string& key = "1",
                                                               std::string type = "shell") {
    auto answer = std::make_shared<std::optional<Result<OpenResult>>>();
    OpenParams params;
    params.type = std::move(type);
    params.name = std::move(name);
    service_->Open(owner, params, key, [answer](Result<OpenResult> r) { *answer = std::move(r); });
    return answer;
  }
  Result<OpenResult> Open(const std::shared_ptr<Owner>& owner,
                          std::optional<std::string> name = std::nullopt,
                          const std::string& key = "1") {
    auto answer = StartOpen(owner, std::move(name), key);
    Drain();
    if (!answer->has_value()) return Fail(ErrorKind::kInternal, "terminal_open never answered");
    return **answer;
  }
  // An owner that may outlive its connection, as a `serve --socket` client's.
  std::shared_ptr<Owner> SocketOwner() {
    auto owner = service_->OpenOwner("socket");
    owner->may_detach = true;
    return owner;
  }
  Result<SessionStatus> Close(const std::shared_ptr<Owner>& owner, const std::string& id) {
    std::optional<Result<SessionStatus>> answer;
    service_->Close(owner, id, "closed by the test", [&](auto r) { answer = std::move(r); });
    Drain();
    if (!answer) return Fail(ErrorKind::kInternal, "terminal_close never answered");
    return *answer;
  }

  TempDir dir_;
  asio::io_context io_;
  FakeBackend* fake_ = nullptr;
  std::function<size_t()> headroom_;
  std::vector<FakeTimer> timers_;
  std::unique_ptr<PtyService> service_;
};

TEST_F(ServiceTest, OpensASessionAndScopesItToItsOwner) {
  Start();
  auto a = service_->OpenOwner("a");
  Result<OpenResult> opened = Open(a, "build");
  ASSERT_TRUE(opened) << opened.error().Describe();
  EXPECT_EQ(opened->session_id.rfind("pty-", 0), 0u);
  EXPECT_EQ(opened->session_id.size(), 4u + 32u);
  EXPECT_EQ(opened->name, "build");
  EXPECT_EQ(opened->motd, "fake motd");
  EXPECT_EQ(opened->mode, policy::Mode::kWorkspaceWrite);
  EXPECT_EQ(opened->cwd, dir_.path() / "ws");
  ASSERT_EQ(fake_->spawns.size(), 1u);
  EXPECT_EQ(fake_->spawns[0]->spec.name, "build");
  EXPECT_EQ(fake_->spawns[0]->spec.cwd, dir_.path() / "ws");

  std::vector<SessionInfo> listed = service_->List(*a);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].session_id, opened->session_id);
  EXPECT_EQ(listed[0].name, "build");
  EXPECT_EQ(service_->session_count(), 1u);
  EXPECT_EQ(a->fence().open_sessions(), 1);

  // Another owner neither sees nor reaches it: its id reads as unknown.
  auto b = service_->OpenOwner("b");
  EXPECT_TRUE(service_->List(*b).empty());
  Result<SessionInfo> foreign = service_->Status(*b, opened->session_id);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(Close(b, opened->session_id).error().kind, ErrorKind::kNotFound);
  EXPECT_TRUE(fake_->sessions[0]->close_reasons.empty());
  ASSERT_TRUE(service_->Resize(*a, opened->session_id, 100, 30));
  EXPECT_EQ(fake_->sessions[0]->size_, std::make_pair(30, 100));
}

// Watching (terminal_watch) and taking over (terminal_takeover): only with the owner's token;
// the session's output reaches the watcher after the snapshot; a hold refuses the owner's
// sends and passes the person's keys; the watch's end releases it; a close ends the watch.
TEST_F(ServiceTest, AWatchNeedsTheTokenSeesLaterOutputAndAHoldRefusesTheOwnersSends) {
  Start();
  auto agent = service_->OpenOwner("agent");
  Result<OpenResult> opened = Open(agent);
  ASSERT_TRUE(opened) << opened.error().Describe();
  const std::string id = opened->session_id;
  auto person = service_->OpenOwner("person");
  std::string seen;
  std::vector<WatchEnd> ends;
  auto sink = [&](uint64_t) {
    return WatchHub::Watcher{.on_output =
                                 [&](std::string_view bytes) {
                                   seen += bytes;
                                   return true;
                                 },
                             .on_end = [&](WatchEnd end) { ends.push_back(end); }};
  };
  EXPECT_EQ(service_->Watch(*person, id, std::nullopt, sink).error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(service_->Watch(*person, id, agent->token() + "0", sink).error().kind,
            ErrorKind::kNotFound);
  EXPECT_EQ(service_->ListByToken("owner-nobody").error().kind, ErrorKind::kNotFound);
  ASSERT_EQ(service_->ListByToken(agent->token())->size(), 1u);

  Result<WatchStart> watch = service_->Watch(*person, id, agent->token(), sink);
  ASSERT_TRUE(watch) << watch.error().Describe();
  EXPECT_EQ(watch->screen.lines, std::vector<std::string>{"fake screen"});
  fake_->spawns[0]->spec.output_tap("hello");  // the session's output, after the snapshot
  EXPECT_EQ(seen, "hello");

  auto send = [&] {
    std::optional<Result<SendOutcome>> answer;
    backend::SendRequest request;
    request.input = "ls\n";
    service_->Send(agent, id, request, false, "7", [&](auto r) { answer = std::move(r); });
    Drain();
    return *answer;
  };
  EXPECT_EQ(service_->Type(*person, watch->watch_id, "x").error().kind, ErrorKind::kBusy);
  ASSERT_TRUE(service_->TakeOver(*person, watch->watch_id));
  auto stranger = service_->OpenOwner("stranger");
  EXPECT_EQ(service_->TakeOver(*stranger, watch->watch_id).error().kind, ErrorKind::kNotFound);
  Result<SendOutcome> refused = send();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kBusy);
  EXPECT_NE(refused.error().message.find("a person holds this session"), std::string::npos);
  EXPECT_TRUE(service_->Status(*agent, id)->busy);
  ASSERT_TRUE(service_->Type(*person, watch->watch_id, "ls\r"));
  EXPECT_EQ(fake_->sessions[0]->typed, "ls\r");

  // The watch's end gives the session back: the send reaches the session (which refuses it
  // for its own reason).
  ASSERT_TRUE(service_->Unwatch(*person, watch->watch_id));
  EXPECT_FALSE(service_->Status(*agent, id)->busy);
  EXPECT_EQ(send().error().message, "the fake runs no sends");
  EXPECT_TRUE(ends.empty());  // an unwatch is not told

  ASSERT_TRUE(service_->Watch(*person, id, agent->token(), sink));
  ASSERT_TRUE(Close(agent, id));
  EXPECT_EQ(ends, std::vector<WatchEnd>{WatchEnd::kClosed});
}

TEST_F(ServiceTest, AnUnknownTypeNamesTheAvailableOnes) {
  Start();
  auto owner = service_->OpenOwner("a");
  auto answer = StartOpen(owner, std::nullopt, "1", "vm");
  Drain();
  ASSERT_TRUE(answer->has_value());
  ASSERT_FALSE(**answer);
  EXPECT_EQ((*answer)->error().kind, ErrorKind::kInvalidParams);
  EXPECT_EQ((*answer)->error().message,
            "unknown session type \"vm\"; the available type is \"shell\"");
  EXPECT_TRUE(fake_->spawns.empty());
}

TEST_F(ServiceTest, ANameIsTakenWhileItsSessionOpensAndWhileItIsOpen) {
  Start();
  auto owner = service_->OpenOwner("a");
  fake_->answer_at_once = false;
  auto first = StartOpen(owner, "db", "1");
  Result<OpenResult> twice = Open(owner, "db", "2");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind, ErrorKind::kNameTaken);
  EXPECT_NE(twice.error().message.find("still opening"), std::string::npos);
  EXPECT_EQ(fake_->spawns.size(), 1u) << "a refused open spawns nothing";

  fake_->Succeed(0);
  Drain();
  ASSERT_TRUE(first->has_value() && **first);
  const std::string id = (**first)->session_id;
  fake_->answer_at_once = true;
  Result<OpenResult> again = Open(owner, "db", "3");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::kNameTaken);
  EXPECT_EQ(again.error().holder_session_id, id);

  // Another owner has names of its own.
  auto other = service_->OpenOwner("b");
  EXPECT_TRUE(Open(other, "db"));
  // Closing frees the name.
  ASSERT_TRUE(Close(owner, id));
  Result<OpenResult> reopened = Open(owner, "db", "4");
  ASSERT_TRUE(reopened) << reopened.error().Describe();
  EXPECT_NE(reopened->session_id, id);
}

TEST_F(ServiceTest, AFailedOpenGivesItsNameAndItsPlaceBack) {
  Start("{maxSessions: 1}");
  auto owner = service_->OpenOwner("a");
  fake_->answer_at_once = false;
  auto failed = StartOpen(owner, "db");
  EXPECT_EQ(owner->fence().spawns_in_progress(), 1);
  fake_->FailSpawn(0, Error{ErrorKind::kSpawnFailed, "bash would not start"});
  Drain();
  ASSERT_TRUE(failed->has_value());
  ASSERT_FALSE(**failed);
  EXPECT_EQ((*failed)->error().kind, ErrorKind::kSpawnFailed);
  EXPECT_EQ(owner->fence().spawns_in_progress(), 0);
  EXPECT_EQ(owner->open_and_opening(), 0u);
  fake_->answer_at_once = true;
  EXPECT_TRUE(Open(owner, "db", "2"));
}

TEST_F(ServiceTest, PerOwnerLimitCountsOpensInProgress) {
  Start("{maxSessions: 2}");
  auto owner = service_->OpenOwner("a");
  ASSERT_TRUE(Open(owner, std::nullopt, "1"));
  fake_->answer_at_once = false;
  auto opening = StartOpen(owner, std::nullopt, "2");
  Result<OpenResult> third = Open(owner, std::nullopt, "3");
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, ErrorKind::kPolicyDenied);
  EXPECT_EQ(third.error().context, "limits.maxSessions");
  EXPECT_EQ(fake_->spawns.size(), 2u);
  // The limit is per owner.
  auto other = service_->OpenOwner("b");
  auto others = StartOpen(other, std::nullopt, "1");
  EXPECT_EQ(fake_->spawns.size(), 3u);
  EXPECT_EQ(service_->session_count(), 3u) << "opens in progress count as sessions";
}

TEST_F(ServiceTest, TheDaemonLimitSpansOwnersAndBoundsTheWarmPool) {
  Start("{}", 2);
  EXPECT_EQ(headroom_(), 2u);
  auto a = service_->OpenOwner("a");
  auto b = service_->OpenOwner("b");
  ASSERT_TRUE(Open(a));
  EXPECT_EQ(headroom_(), 1u);
  ASSERT_TRUE(Open(b));
  EXPECT_EQ(headroom_(), 0u);
  Result<OpenResult> over = Open(service_->OpenOwner("c"));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().kind, ErrorKind::kPolicyDenied);
  EXPECT_EQ(over.error().context, "maxSessions");
}

TEST_F(ServiceTest, CancelingAnOpenAnswersItCanceledAndFreesItsName) {
  Start();
  auto owner = service_->OpenOwner("a");
  fake_->answer_at_once = false;
  auto answer = StartOpen(owner, "db", "7");
  EXPECT_FALSE(service_->CancelRequest(*owner, "8", "not this one"));
  EXPECT_TRUE(service_->CancelRequest(*owner, "7", "the user gave up"));
  Drain();
  EXPECT_EQ(fake_->spawns[0]->cancel_reason, "the user gave up");
  ASSERT_TRUE(answer->has_value());
  ASSERT_FALSE(**answer);
  EXPECT_EQ((*answer)->error().kind, ErrorKind::kCanceled);
  EXPECT_FALSE(service_->CancelRequest(*owner, "7", "again")) << "the open already answered";
  EXPECT_EQ(owner->fence().spawns_in_progress(), 0);
  fake_->answer_at_once = true;
  EXPECT_TRUE(Open(owner, "db", "9"));
}

TEST_F(ServiceTest, AShellThatCameUpAfterADisconnectIsClosedBeforeTheOwnerIs) {
  Start();
  auto owner = service_->OpenOwner("a");
  fake_->answer_at_once = false;
  fake_->cancel_answers = false;  // the shell was already up when the cancel came
  fake_->hold_close = true;
  auto answer = StartOpen(owner, "db");
  bool owner_closed = false;
  service_->CloseOwner(owner, [&] { owner_closed = true; });
  Drain();
  EXPECT_EQ(fake_->spawns[0]->cancel_reason, "the client disconnected");
  EXPECT_FALSE(owner_closed) << "a spawn is still in progress";

  fake_->Succeed(0);
  Drain();
  ASSERT_TRUE(answer->has_value());
  ASSERT_FALSE(**answer);
  EXPECT_EQ((*answer)->error().kind, ErrorKind::kCanceled);
  ASSERT_EQ(fake_->sessions.size(), 1u);
  EXPECT_EQ(fake_->sessions[0]->close_reasons,
            std::vector<std::string>{"owner disconnected during open"});
  EXPECT_FALSE(owner_closed) << "the unowned shell's processes are not gone yet";
  EXPECT_EQ(service_->session_count(), 1u) << "its spawn still counts";

  fake_->sessions[0]->ReleaseClose();
  Drain();
  EXPECT_TRUE(owner_closed);
  EXPECT_TRUE(service_->List(*owner).empty());
  EXPECT_EQ(service_->session_count(), 0u);
}

TEST_F(ServiceTest, TheModeFenceHoldsWhileSessionsOrSpawnsLive) {
  Start();
  auto owner = service_->OpenOwner("a");
  fake_->answer_at_once = false;
  auto answer = StartOpen(owner, std::nullopt);
  Result<policy::Mode> while_opening = service_->SetMode(*owner, policy::Mode::kReadOnly);
  ASSERT_FALSE(while_opening);
  EXPECT_EQ(while_opening.error().kind, ErrorKind::kModeFenced);

  fake_->Succeed(0);
  Drain();
  ASSERT_TRUE(answer->has_value() && **answer);
  Result<policy::Mode> while_open = service_->SetMode(*owner, policy::Mode::kReadOnly);
  ASSERT_FALSE(while_open);
  EXPECT_EQ(while_open.error().kind, ErrorKind::kModeFenced);
  // The mode in effect is no change.
  EXPECT_TRUE(service_->SetMode(*owner, policy::Mode::kWorkspaceWrite));

  ASSERT_TRUE(Close(owner, (**answer)->session_id));
  EXPECT_EQ(fake_->sessions[0]->close_reasons, std::vector<std::string>{"closed by the test"});
  std::vector<policy::Mode> announced;
  owner->on_policy_changed = [&](const policy::ResolvedPolicy& p) { announced.push_back(p.mode); };
  Result<policy::Mode> set = service_->SetMode(*owner, policy::Mode::kReadOnly);
  ASSERT_TRUE(set) << set.error().Describe();
  EXPECT_EQ(*set, policy::Mode::kReadOnly);
  EXPECT_EQ(announced, std::vector<policy::Mode>{policy::Mode::kReadOnly});
  fake_->answer_at_once = true;
  Result<OpenResult> narrowed = Open(owner, std::nullopt, "2");
  ASSERT_TRUE(narrowed);
  EXPECT_EQ(narrowed->mode, policy::Mode::kReadOnly);
  EXPECT_EQ(fake_->spawns[1]->spec.policy.mode, policy::Mode::kReadOnly);
}

TEST_F(ServiceTest, CloseAnswersOnceTheProcessesAreGone) {
  Start();
  auto owner = service_->OpenOwner("a");
  fake_->hold_close = true;
  Result<OpenResult> opened = Open(owner, "db");
  ASSERT_TRUE(opened);
  std::optional<Result<SessionStatus>> answer;
  service_->Close(owner, opened->session_id, "first", [&](auto r) { answer = std::move(r); });
  Drain();
  EXPECT_FALSE(answer) << "close answers only once the processes are gone";
  EXPECT_EQ(service_->List(*owner).size(), 1u);
  fake_->sessions[0]->ReleaseClose();
  Drain();
  ASSERT_TRUE(answer && *answer);
  EXPECT_TRUE((*answer)->exited);
  EXPECT_TRUE(service_->List(*owner).empty());
  EXPECT_EQ(owner->fence().open_sessions(), 0);
}

TEST_F(ServiceTest, ADetachedOwnerKeepsItsSessionsUntilAttached) {
  Start("{detachGraceMs: 600000}");
  auto owner = SocketOwner();
  Result<OpenResult> opened = Open(owner, "db");
  ASSERT_TRUE(opened);
  ASSERT_TRUE(service_->DetachOwner(owner));
  EXPECT_TRUE(owner->detached());
  EXPECT_EQ(service_->detached_owner_count(), 1u);
  Drain();
  EXPECT_TRUE(fake_->sessions[0]->close_reasons.empty());

  Result<AttachResult> wrong = service_->AttachOwner("owner-" + std::string(64, '0'));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().kind, ErrorKind::kNotFound);
  Result<AttachResult> attached = service_->AttachOwner(owner->token());
  ASSERT_TRUE(attached) << attached.error().Describe();
  EXPECT_EQ(attached->owner, owner);
  ASSERT_EQ(attached->sessions.size(), 1u);
  EXPECT_EQ(attached->sessions[0].session_id, opened->session_id);
  EXPECT_EQ(attached->sessions[0].name, "db");
  EXPECT_EQ(service_->detached_owner_count(), 0u);
  ASSERT_EQ(timers_.size(), 1u);
  EXPECT_TRUE(timers_[0].handle.expired()) << "attaching stops the grace";
  // Its connection is live again: a second attach is busy.
  Result<AttachResult> twice = service_->AttachOwner(owner->token());
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind, ErrorKind::kBusy);
  // Its names held across the detach.
  EXPECT_EQ(Open(owner, "db", "2").error().kind, ErrorKind::kNameTaken);
}

TEST_F(ServiceTest, WithoutAGraceAnOwnerIsNotDetached) {
  Start("{detachGraceMs: 0}");
  auto owner = SocketOwner();
  ASSERT_TRUE(Open(owner));
  EXPECT_FALSE(service_->DetachOwner(owner));
  auto stdio = service_->OpenOwner("stdio");  // may_detach stays false
  EXPECT_FALSE(service_->DetachOwner(stdio));
  EXPECT_EQ(service_->detached_owner_count(), 0u);
  EXPECT_EQ(service_->Info(*owner).detach_grace_ms, 0);
}

TEST_F(ServiceTest, TheGraceEndsAsADisconnect) {
  Start("{detachGraceMs: 45000}");
  auto owner = SocketOwner();
  ASSERT_TRUE(Open(owner));
  ASSERT_TRUE(service_->DetachOwner(owner));
  ASSERT_EQ(timers_.size(), 1u);
  EXPECT_EQ(timers_[0].delay, std::chrono::milliseconds(45000)) << "the operator's grace";
  Drain();
  EXPECT_TRUE(fake_->sessions[0]->close_reasons.empty()) << "nothing closes before the grace";
  ASSERT_FALSE(timers_[0].handle.expired());
  timers_[0].fire();
  Drain();
  EXPECT_EQ(fake_->sessions[0]->close_reasons, std::vector<std::string>{"owner disconnected"});
  EXPECT_EQ(service_->detached_owner_count(), 0u);
  EXPECT_TRUE(owner->closed());
  EXPECT_EQ(service_->AttachOwner(owner->token()).error().kind, ErrorKind::kNotFound);
  EXPECT_TRUE(timers_[0].handle.expired()) << "the expired grace's timer is released";
}

// A detach cancels an open in flight; its late answer must not disturb an open of the next
// connection that reuses its request id.
TEST_F(ServiceTest, ADetachedOpensLateAnswerLeavesTheNextConnectionsOpenCancelable) {
  Start("{detachGraceMs: 600000}");
  auto owner = SocketOwner();
  fake_->answer_at_once = false;
  fake_->cancel_answers = false;
  auto old_open = StartOpen(owner, "db", "1");
  ASSERT_TRUE(service_->DetachOwner(owner));
  EXPECT_EQ(fake_->spawns[0]->cancel_reason, "the client disconnected");
  ASSERT_TRUE(service_->AttachOwner(owner->token()));

  auto new_open = StartOpen(owner, "web", "1");
  fake_->FailSpawn(0, Error{ErrorKind::kCanceled, "the client disconnected"});
  Drain();
  ASSERT_TRUE(old_open->has_value());
  EXPECT_FALSE(**old_open);
  EXPECT_EQ(owner->open_and_opening(), 1u);
  EXPECT_TRUE(service_->CancelRequest(*owner, "1", "the new client gave up"));
  EXPECT_EQ(fake_->spawns[1]->cancel_reason, "the new client gave up");
}

TEST_F(ServiceTest, ShutdownClosesEveryOwnerThenTheBackends) {
  Start("{detachGraceMs: 600000}");
  auto a = service_->OpenOwner("a");
  auto b = service_->OpenOwner("b");
  b->may_detach = true;
  ASSERT_TRUE(Open(a, std::nullopt, "1"));
  ASSERT_TRUE(Open(a, std::nullopt, "2"));
  ASSERT_TRUE(Open(b));
  ASSERT_TRUE(service_->DetachOwner(b));
  b.reset();  // only the service holds a detached owner
  bool done = false;
  service_->Shutdown([&] {
    // The backends end last, after every session.
    for (const auto& session : fake_->sessions) EXPECT_EQ(session->close_reasons.size(), 1u);
    done = true;
  });
  Drain();
  EXPECT_TRUE(done);
  EXPECT_EQ(fake_->shutdowns, 1);
  EXPECT_EQ(service_->detached_owner_count(), 0u);
  EXPECT_EQ(service_->session_count(), 0u);
}

// A request a connection sent before it saw the daemon stop must
// start nothing: the shutdown would not await the shell, which outlived the reactor.
TEST_F(ServiceTest, AnOpenReadAfterShutdownBeganStartsNothing) {
  Start();
  auto owner = service_->OpenOwner("a");
  ASSERT_TRUE(Open(owner, std::nullopt, "1"));
  bool shut = false;
  service_->Shutdown([&] { shut = true; });
  auto late = StartOpen(owner, std::nullopt, "2");
  auto other = service_->OpenOwner("b");
  auto fresh = StartOpen(other, std::nullopt, "1");
  Drain();
  EXPECT_TRUE(shut);
  EXPECT_EQ(fake_->spawns.size(), 1u) << "only the open before the shutdown spawned";
  for (const auto& answer : {late, fresh}) {
    ASSERT_TRUE(answer->has_value());
    ASSERT_FALSE(**answer);
    EXPECT_EQ((*answer)->error().kind, ErrorKind::kClosed);
  }
  EXPECT_EQ((*late)->error().message,
            "the daemon is shutting down; open the session on a running daemon");
  EXPECT_EQ(service_->session_count(), 0u);
}

TEST_F(ServiceTest, AnOpenOnAClosedOwnerIsRefusedWithItsConnection) {
  Start();
  auto owner = service_->OpenOwner("a");
  bool closed = false;
  service_->CloseOwner(owner, [&] { closed = true; });
  Drain();
  ASSERT_TRUE(closed);
  Result<OpenResult> late = Open(owner);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().kind, ErrorKind::kClosed);
  EXPECT_EQ(late.error().message,
            "this connection is closing; open the session on a new connection");
  EXPECT_TRUE(fake_->spawns.empty());
}

TEST_F(ServiceTest, ClosingAnOwnerWithNothingOpenEndsAtOnce) {
  Start();
  auto owner = service_->OpenOwner("a");
  bool done = false;
  service_->CloseOwner(owner, [&] { done = true; });
  Drain();
  EXPECT_TRUE(done);
  EXPECT_TRUE(owner->closed());
  bool shut = false;
  service_->Shutdown([&] { shut = true; });
  Drain();
  EXPECT_TRUE(shut);
}

// With no backend, an open names none and shutdown still ends (the join of zero backends).
TEST(ServiceWithoutBackendsTest, RefusesOpensAndShutsDown) {
  TempDir dir;
  asio::io_context io;
  ServiceOptions options;
  options.operator_policy = dir.File("operator.yaml", "version: 1\n");
  options.workspace = dir.path();
  PtyService service(io, std::move(options), [](auto) { return Backends{}; });
  auto owner = service.OpenOwner("a");
  std::optional<Result<OpenResult>> answer;
  service.Open(owner, OpenParams{}, "1", [&](Result<OpenResult> r) { answer = std::move(r); });
  bool shut = false;
  service.Shutdown([&] { shut = true; });
  io.run();
  ASSERT_TRUE(answer.has_value());
  ASSERT_FALSE(*answer);
  EXPECT_EQ(answer->error().message,
            "unknown session type \"shell\"; no session type is available");
  EXPECT_TRUE(shut);
}

}  // namespace
}  // namespace ptybox::runtime
