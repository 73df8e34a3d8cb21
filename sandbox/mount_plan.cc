// The mount plan: pure and lexical, so that the order and the choice of every composed mount is
// unit-tested apart from the syscalls that carry it out (sandbox/mount_stage.cc).
#include "sandbox/mount_plan.h"

#include <algorithm>
#include <iterator>
#include <set>

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

fs::path Normal(const fs::path& path) {
  std::string text = path.lexically_normal().string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

// `path` is `dir` or lies beneath it.
bool UnderOrEqual(const fs::path& path, const fs::path& dir) {
  const fs::path rel = Normal(path).lexically_relative(Normal(dir));
  return !rel.empty() && *rel.begin() != "..";
}

bool StrictlyUnder(const fs::path& path, const fs::path& dir) {
  return UnderOrEqual(path, dir) && Normal(path) != Normal(dir);
}

size_t Depth(const fs::path& relative) {
  return static_cast<size_t>(std::distance(relative.begin(), relative.end()));
}

// Which mount wins when two land on the same place: a cover (the secret stays hidden), then a
// protected path (read-only), then a pin (any mount point pins).
int Rank(NestedMount::Kind kind) {
  switch (kind) {
    case NestedMount::Kind::kCoverDir:
    case NestedMount::Kind::kCoverFile:
      return 0;
    case NestedMount::Kind::kProtected:
    case NestedMount::Kind::kInit:
    case NestedMount::Kind::kPrivateGit:
      return 1;
    case NestedMount::Kind::kPin:
      return 2;
  }
  return 3;
}

}  // namespace

std::vector<fs::path> RootsToBind(const fs::path& workspace, const std::vector<fs::path>& extra) {
  std::vector<fs::path> all = {Normal(workspace)};
  for (const fs::path& root : extra) all.push_back(Normal(root));
  std::vector<fs::path> bound;
  for (size_t i = 0; i < all.size(); ++i) {
    bool redundant = false;
    for (size_t j = 0; j < all.size() && !redundant; ++j) {
      if (i == j) continue;
      // Inside another root, or the same root listed earlier.
      redundant = StrictlyUnder(all[i], all[j]) || (all[i] == all[j] && j < i);
    }
    if (!redundant) bound.push_back(all[i]);
  }
  return bound;
}

std::vector<fs::path> GrantedPaths(const SandboxSpec& sandbox, const fs::path& init_binary) {
  std::vector<fs::path> granted = {sandbox.workspace_root};
  granted.insert(granted.end(), sandbox.writable_roots.begin(), sandbox.writable_roots.end());
  granted.push_back(sandbox.cwd);
  granted.push_back(init_binary);
  return granted;
}

std::vector<fs::path> CoveredDirectories(const SandboxSpec& sandbox, const fs::path& init_binary) {
  const std::vector<fs::path> bound = RootsToBind(sandbox.workspace_root, sandbox.writable_roots);
  std::vector<fs::path> covered;
  for (const NestedMount& m : PlanNestedMounts(sandbox.mode, bound, {}, sandbox.hidden,
                                               GrantedPaths(sandbox, init_binary))) {
    if (m.kind == NestedMount::Kind::kCoverDir) covered.push_back(bound[m.root] / m.relative);
  }
  return covered;
}

int HoldingRoot(const std::vector<fs::path>& roots, const fs::path& path, fs::path& relative) {
  for (size_t i = 0; i < roots.size(); ++i) {
    if (StrictlyUnder(path, roots[i])) {
      relative = Normal(path).lexically_relative(Normal(roots[i]));
      return static_cast<int>(i);
    }
  }
  return -1;
}

namespace {

// A pin on each directory between a root and `relative` (not the root, not `relative` itself).
void AddPins(std::vector<NestedMount>& plan, size_t root, const fs::path& relative) {
  fs::path parent;
  for (auto part = relative.begin(); part != relative.end() && std::next(part) != relative.end();
       ++part) {
    parent /= *part;
    plan.push_back({root, parent, NestedMount::Kind::kPin});
  }
}

}  // namespace

std::vector<NestedMount> PlanNestedMounts(policy::Mode mode,
                                          const std::vector<fs::path>& bound_roots,
                                          const std::vector<fs::path>& protected_paths,
                                          const std::vector<HiddenPath>& hidden,
                                          const std::vector<fs::path>& granted,
                                          const std::vector<fs::path>& pinned) {
  const bool writable = mode == policy::Mode::kWorkspaceWrite;
  std::vector<NestedMount> plan;
  fs::path relative;
  if (writable) {
    for (const fs::path& path : protected_paths) {
      const int root = HoldingRoot(bound_roots, path, relative);
      if (root >= 0)
        plan.push_back({static_cast<size_t>(root), relative, NestedMount::Kind::kProtected});
    }
    // A submodule's directory and every directory above it: `mv libs libs2; mkdir -p libs/foo;
    // git init libs/foo` fails, so no repository the session makes takes the submodule's place
    // (the host's `git status` enters it).
    for (const fs::path& path : pinned) {
      const int root = HoldingRoot(bound_roots, path, relative);
      if (root < 0) continue;
      AddPins(plan, static_cast<size_t>(root), relative);
      plan.push_back({static_cast<size_t>(root), relative, NestedMount::Kind::kPin});
    }
  }
  for (const HiddenPath& h : hidden) {
    if (h.directory && std::any_of(granted.begin(), granted.end(), [&](const fs::path& g) {
          return !g.empty() && UnderOrEqual(g, h.path);
        })) {
      continue;  // the operator granted what it holds
    }
    const int root = HoldingRoot(bound_roots, h.path, relative);
    if (root < 0) continue;
    plan.push_back({static_cast<size_t>(root), relative,
                    h.directory ? NestedMount::Kind::kCoverDir : NestedMount::Kind::kCoverFile});
    if (!writable) continue;  // a read-only tree cannot be renamed: nothing to pin
    AddPins(plan, static_cast<size_t>(root), relative);
  }
  // Shallow first (a parent's mount is in place before anything beneath it is reached through
  // it); on one place the strongest kind only; nothing beneath a covered directory.
  std::stable_sort(plan.begin(), plan.end(), [](const NestedMount& a, const NestedMount& b) {
    const size_t da = Depth(a.relative);
    const size_t db = Depth(b.relative);
    if (da != db) return da < db;
    if (a.root != b.root) return a.root < b.root;
    if (a.relative != b.relative) return a.relative < b.relative;
    return Rank(a.kind) < Rank(b.kind);
  });
  // Looked up by place, not by a scan of what is kept: a workspace of thousands of nested
  // repositories made this check quadratic (83% of such a launch's CPU).
  std::vector<NestedMount> result;
  std::set<std::pair<size_t, fs::path>> placed;
  std::set<std::pair<size_t, fs::path>> covered_dirs;
  auto beneath_a_cover = [&](const NestedMount& m) {
    for (fs::path up = m.relative.parent_path(); !up.empty(); up = up.parent_path()) {
      if (covered_dirs.contains({m.root, up})) return true;
      if (up == up.parent_path()) break;
    }
    return false;
  };
  for (const NestedMount& m : plan) {
    if (placed.contains({m.root, m.relative}) || beneath_a_cover(m)) continue;
    placed.insert({m.root, m.relative});
    if (m.kind == NestedMount::Kind::kCoverDir) covered_dirs.insert({m.root, m.relative});
    result.push_back(m);
  }
  return result;
}

}  // namespace ptybox::sandbox
