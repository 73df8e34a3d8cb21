// The cost of the check after a workspace-write launch (sandbox::CheckRepositoriesAfterLaunch:
// the roots walked with every directory watched, then this process's mountinfo), with each way
// of watching: fanotify (a daemon that is root of the host) and inotify (anyone else, one watch
// per directory). Not a test: run build/bench/repository_check_bench as root (fanotify needs
// it); docs/security.md, "Protected paths", has the figures.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sandbox/repository_walk.h"

namespace {

namespace fs = std::filesystem;

// A workspace under /tmp, made once per shape: `files` files in one directory, and `dirs`
// directories in groups of 200.
fs::path Workspace(int files, int dirs) {
  static struct Made : std::map<std::pair<int, int>, fs::path> {
    ~Made() {
      for (const auto& [shape, root] : *this) fs::remove_all(root);
    }
  } made;
  fs::path& root = made[{files, dirs}];
  if (!root.empty()) return root;
  char pattern[] = "/tmp/ptybox-check-bench-XXXXXX";
  root = ::mkdtemp(pattern);
  fs::create_directories(root / "files");
  for (int i = 0; i < files; ++i) std::ofstream(root / "files" / ("f" + std::to_string(i)));
  for (int i = 0; i < dirs; ++i) {
    fs::create_directories(root / "dirs" / std::to_string(i / 200) / std::to_string(i));
  }
  return root;
}

// Args: files, directories, and 1 for fanotify (as a root daemon chooses), 0 for inotify, or 2
// for the walk alone (RepositoriesOfLaunch, unwatched: what the watches add to it).
void BM_CheckAfterLaunch(benchmark::State& state) {
  const fs::path root =
      Workspace(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  if (state.range(2) == 0) {
    ::setenv("PTYBOX_TREE_WATCH", "inotify", 1);
  } else {
    ::unsetenv("PTYBOX_TREE_WATCH");
  }
  ptybox::sandbox::SandboxSpec sandbox;
  sandbox.mode = ptybox::policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = root;
  struct timespec started {};
  ::clock_gettime(CLOCK_REALTIME, &started);
  for (auto _ : state) {
    std::optional<std::string> why =
        state.range(2) == 2
            ? ptybox::sandbox::RepositoriesOfLaunch(sandbox).incomplete
            : ptybox::sandbox::CheckRepositoriesAfterLaunch(sandbox, {}, ::getpid(), started);
    if (why) {
      state.SkipWithError(why->substr(0, 160).c_str());
      break;
    }
  }
  ::unsetenv("PTYBOX_TREE_WATCH");
}

BENCHMARK(BM_CheckAfterLaunch)
    ->ArgNames({"files", "dirs", "watch"})
    ->Args({20000, 200, 2})
    ->Args({20000, 200, 0})
    ->Args({20000, 200, 1})
    ->Args({0, 50000, 2})
    ->Args({0, 50000, 0})
    ->Args({0, 50000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(6)
    ->ComputeStatistics("min",
                        [](const std::vector<double>& v) {
                          return *std::min_element(v.begin(), v.end());
                        })
    ->ComputeStatistics("max", [](const std::vector<double>& v) {
      return *std::max_element(v.begin(), v.end());
    });

}  // namespace

BENCHMARK_MAIN();
