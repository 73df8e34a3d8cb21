#include "tests/audit/audit_support.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace ptybox::testing {

std::vector<Json> ReadAuditLog(const std::filesystem::path& path, size_t max_line_bytes) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Json> records;
  for (std::string line; std::getline(in, line);) {
    EXPECT_LE(line.size(), max_line_bytes) << line.substr(0, 200);
    try {
      records.push_back(Json::parse(line));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a JSON line (" << e.what() << "): " << line.substr(0, 200);
    }
  }
  return records;
}

std::vector<Json> EventsNamed(const std::vector<Json>& records, const std::string& event) {
  std::vector<Json> out;
  for (const Json& r : records) {
    if (r.value("event", "") == event) out.push_back(r);
  }
  return out;
}

std::vector<std::string> EventNames(const std::vector<Json>& records) {
  std::vector<std::string> out;
  for (const Json& r : records) out.push_back(r.value("event", "?"));
  return out;
}

unsigned FileMode(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

Json WaitBackgroundDone(RpcClient& client, const std::string& session) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    Json out = client.Call("terminal_output", Json{{"sessionId", session}});
    if (!out.contains("result") || out["result"].value("done", false)) return out;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the background send never finished";
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int Shell(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace ptybox::testing
