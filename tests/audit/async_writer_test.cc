// The writer behind the audit log and recordings: files created 0600 and appended; a symlink,
// a directory or an unopenable path refused and reported, never followed; lines that do not
// fit the queue dropped, counted, and told in the file before the next line written; a
// recording bounded with a final marker. Each writer is destroyed before the file is read (its
// destructor drains), so nothing here waits on time.
#include "runtime/audit/async_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "runtime/audit/session_recorder.h"
#include "tests/support/temp_dir.h"

namespace ptybox::runtime {
namespace {

namespace fs = std::filesystem;

using ::ptybox::testing::TempDir;

std::vector<std::string> Lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The writer creates a file only by name inside a directory held open, as the daemon does.
std::shared_ptr<const UniqueFd> OpenDir(const fs::path& dir) {
  return std::make_shared<const UniqueFd>(
      ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
}

AppendFileSpec Spec(const fs::path& path, size_t bound = 1 << 20) {
  AppendFileSpec spec;
  spec.path = path;
  spec.dir = OpenDir(path.parent_path());
  spec.max_queued_bytes = bound;
  spec.report = std::make_shared<WriteFailureReport>(WriteFailureReport{"the test log", false});
  spec.dropped_line = [](uint64_t lines, uint64_t bytes, std::string_view) {
    return "dropped " + std::to_string(lines) + " " + std::to_string(bytes) + "\n";
  };
  return spec;
}

TEST(AsyncWriterTest, AppendsLinesToAFileCreated0600) {
  TempDir dir;
  const fs::path log = dir.path() / "audit.jsonl";
  { std::ofstream existing(log); }
  ::chmod(log.c_str(), 0600);
  {
    std::ofstream(log, std::ios::app) << "earlier\n";
    AsyncWriter writer;
    auto file = writer.Open(Spec(log));
    EXPECT_TRUE(file->Append("one\n"));
    EXPECT_TRUE(file->Append("two\n"));
    file->Close();
    EXPECT_FALSE(file->Append("after close\n"));
  }
  EXPECT_EQ(Lines(log), (std::vector<std::string>{"earlier", "one", "two"}));

  const fs::path fresh = dir.path() / "fresh.jsonl";
  const mode_t old_mask = ::umask(0);
  {
    AsyncWriter writer;
    writer.Open(Spec(fresh))->Append("x\n");
  }
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(AsyncWriterTest, NeverFollowsASymlink) {
  TempDir dir;
  const fs::path target = dir.path() / "elsewhere";
  { std::ofstream(target) << "untouched\n"; }
  const fs::path link = dir.path() / "audit.jsonl";
  fs::create_symlink(target, link);
  auto report = std::make_shared<WriteFailureReport>(WriteFailureReport{"the test log", false});
  std::shared_ptr<AsyncWriter::File> file;
  {
    AsyncWriter writer;
    AppendFileSpec spec = Spec(link);
    spec.report = report;
    file = writer.Open(std::move(spec));
    file->Append("secret\n");
    file->Close();
  }
  const AppendFileStats stats = file->stats();
  EXPECT_EQ(Lines(target), (std::vector<std::string>{"untouched"}));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(report->reported);
  EXPECT_EQ(stats.written_lines, 0u);
  EXPECT_EQ(stats.dropped_lines, 1u);
}

TEST(AsyncWriterTest, ADirectoryIsReportedAndLinesAreCounted) {
  TempDir dir;
  auto report = std::make_shared<WriteFailureReport>(WriteFailureReport{"the test log", false});
  std::shared_ptr<AsyncWriter::File> file;
  {
    AsyncWriter writer;
    AppendFileSpec spec = Spec(dir.path());
    spec.report = report;
    file = writer.Open(std::move(spec));
    for (int i = 0; i < 10; ++i) file->Append("line\n");
    file->Close();
  }
  EXPECT_TRUE(report->reported);
  EXPECT_EQ(file->stats().written_lines, 0u);
  EXPECT_EQ(file->stats().dropped_lines, 10u);
}

TEST(AsyncWriterTest, ALineOverTheBoundIsDroppedAndToldBeforeTheNext) {
  TempDir dir;
  const fs::path log = dir.path() / "audit.jsonl";
  std::shared_ptr<AsyncWriter::File> file;
  {
    AsyncWriter writer;
    file = writer.Open(Spec(log, /*bound=*/64));
    EXPECT_TRUE(file->Append("first\n"));
    EXPECT_FALSE(file->Append(std::string(100, 'x') + "\n"));
    EXPECT_FALSE(file->Append(std::string(200, 'y') + "\n"));
    EXPECT_TRUE(file->Append("after\n"));
    EXPECT_FALSE(file->Append(std::string(65, 'z') + "\n"));
    file->Close();
  }
  // The drop is told where it happened, and one at the end for the last one.
  EXPECT_EQ(Lines(log),
            (std::vector<std::string>{"first", "dropped 2 302", "after", "dropped 1 66"}));
  EXPECT_EQ(file->stats().dropped_lines, 3u);
  EXPECT_EQ(file->stats().written_lines, 2u);
}

TEST(SessionRecorderTest, WritesAHeaderAndOrderedEventsAndStopsAtItsBound) {
  TempDir dir;
  std::optional<fs::path> path;
  {
    AsyncWriter writer;
    SessionRecorder::Options o;
    o.dir = dir.path();
    o.dir_fd = OpenDir(dir.path());
    o.max_bytes = 64 * 1024;
    o.columns = 90;
    o.rows = 20;
    o.env = {{"TERM", "xterm-256color"}};
    o.report = std::make_shared<WriteFailureReport>(WriteFailureReport{"recordings", false});
    SessionRecorder recorder(writer, o);
    recorder.Output("startup$ ");  // before the session has a name: kept
    recorder.Publish("pty-test");
    recorder.Input("echo hi\n");
    recorder.Output("echo hi\r\nhi\r\n\xE2\x82");  // a character split across reads
    recorder.Output("\xAC\r\n");
    recorder.Resize(100, 30);
    for (int i = 0; i < 1000; ++i) recorder.Output(std::string(200, 'x'));
    EXPECT_TRUE(recorder.stopped());
    recorder.Finish("closed");
    path = recorder.path();
  }
  ASSERT_TRUE(path);
  EXPECT_EQ(*path, dir.path() / "pty-test.cast");
  struct stat st {};
  ASSERT_EQ(::stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_LE(st.st_size, 64 * 1024);
  std::vector<std::string> lines = Lines(*path);
  ASSERT_GT(lines.size(), 6u);
  nlohmann::json header = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(header["version"], 2);
  EXPECT_EQ(header["width"], 90);
  EXPECT_EQ(header["height"], 20);
  double last = 0;
  std::string output;
  std::vector<std::string> codes;
  for (size_t i = 1; i < lines.size(); ++i) {
    nlohmann::json e = nlohmann::json::parse(lines[i]);
    ASSERT_TRUE(e.is_array() && e.size() == 3) << lines[i];
    EXPECT_GE(e[0].get<double>(), last) << lines[i];
    last = e[0].get<double>();
    codes.push_back(e[1]);
    if (e[1] == "o") output += e[2].get<std::string>();
    if (i <= 5) {
      EXPECT_NE(e[1], "m") << lines[i];
    }
  }
  EXPECT_EQ(nlohmann::json::parse(lines[1])[2], "startup$ ");
  EXPECT_EQ(nlohmann::json::parse(lines[2])[1], "i");
  EXPECT_EQ(nlohmann::json::parse(lines[2])[2], "echo hi\n");
  EXPECT_NE(output.find("hi\r\n\xE2\x82\xAC\r\n"), std::string::npos);
  EXPECT_NE(std::find(codes.begin(), codes.end(), "r"), codes.end());
  EXPECT_EQ(codes.back(), "m");
  EXPECT_NE(lines.back().find("recording stopped"), std::string::npos) << lines.back();
  EXPECT_NE(output.find("recording stopped"), std::string::npos);
}

}  // namespace
}  // namespace ptybox::runtime
