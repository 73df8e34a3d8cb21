#include "backend/child_reaper.h"

#include <sys/wait.h>

#include <algorithm>
#include <asio/post.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/readiness/proc_parse.h"
#include "common/log.h"
#include "common/proc_stat.h"

namespace ptybox::backend {

ChildReaper::ChildReaper(asio::io_context& io) : io_(io), sigchld_(io, SIGCHLD) { Arm(); }

void ChildReaper::Arm() {
  sigchld_.async_wait([this](const std::error_code& ec, int) {
    if (ec) return;
    ReapAll();
    Arm();
  });
}

void ChildReaper::Watch(pid_t pid, ExitCallback callback) {
  auto early = unclaimed_.find(pid);
  if (early != unclaimed_.end()) {
    int status = early->second;
    unclaimed_.erase(early);
    asio::post(io_, [callback = std::move(callback), status] { callback(status); });
    return;
  }
  watchers_[pid] = std::move(callback);
}

void ChildReaper::Unwatch(pid_t pid) { watchers_.erase(pid); }

namespace {

// Our live children (a child hangs off the thread that forked it, or, adopted, off any of ours).
std::vector<pid_t> OurChildren() {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<pid_t> listed;
    if (proc::ParsePidList(text, listed))
      children.insert(children.end(), listed.begin(), listed.end());
  }
  return children;
}

// Whether `pid` is the init (pid 1) of a pid namespace below ours: the last NSpid field is 1.
bool IsNamespaceInit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("NSpid:")) continue;
    size_t tab = line.find_last_of(" \t");
    return tab != std::string::npos && line.substr(tab + 1) == "1" &&
           line.find_first_of(" \t", 6) != tab;
  }
  return false;
}

}  // namespace

int ChildReaper::EndAdopted() {
  if (!kill_adopted_) return 0;
  std::vector<pid_t> adopted;
  for (pid_t pid : OurChildren()) {
    if (!watchers_.contains(pid)) adopted.push_back(pid);
  }
  if (adopted.empty()) return 0;
  const std::vector<::ptybox::proc::StatFields> table = ::ptybox::proc::ReadAllStats();
  int killed = 0;
  for (pid_t pid : adopted) {
    // A zombie (or a task already dying) runs nothing; the next SIGCHLD reaps it.
    auto stat = std::ranges::find(table, pid, &::ptybox::proc::StatFields::pid);
    if (stat == table.end() || ::ptybox::proc::IsDead(*stat)) continue;
    // Started by the daemon itself with no exit signal (RunCaptured: git index-pack, a host
    // probe), and waited for by the thread that started it. An orphan re-parented to us always
    // has SIGCHLD (the kernel resets it), so no session's process looks like one.
    if (stat->exit_signal == 0) continue;
    std::vector<pid_t> tree = ::ptybox::proc::Descendants(table, pid);
    tree.insert(tree.begin(), pid);
    for (pid_t member : tree) killed += ::kill(member, SIGKILL) == 0 ? 1 : 0;
    // The pid 1 of a confined session's pid namespace (bwrap) re-parents to us for a moment
    // when the outer bwrap exits first at the session's normal end: ending it ends its
    // namespace, as it was about to. Anything else is a leak worth a line in the log.
    if (!IsNamespaceInit(pid)) {
      LogWarn("ended process " + std::to_string(pid) + " (and " + std::to_string(tree.size() - 1) +
              " descendants): a session leaked it when its ptybox-init died");
    }
  }
  return killed;
}

void ChildReaper::ReapAll() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      EndAdopted();
      return;
    }
    auto it = watchers_.find(pid);
    if (it == watchers_.end()) {
      // An orphan, or a child whose watcher is not registered yet.
      if (unclaimed_.size() > 1024) unclaimed_.erase(unclaimed_.begin());
      unclaimed_[pid] = status;
      continue;
    }
    ExitCallback callback = std::move(it->second);
    watchers_.erase(it);
    asio::post(io_, [callback = std::move(callback), status] { callback(status); });
  }
}

}  // namespace ptybox::backend
