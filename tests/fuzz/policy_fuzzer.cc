// libFuzzer target for the policy parser (policy/yaml_tree.h + policy/policy_file.h): the input's
// first byte picks the file's role (operator or repository), the rest is the file's text. The
// parser must answer every text without throwing or crashing, within its bounds, and every error
// it reports must be a policy error that says where ("<file>:<line>:<column>: ...").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/policy_file.h"
#include "policy/yaml_tree.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Depth of the tree, to check the reader's own bound.
int Depth(const ptybox::policy::YamlNode& node) {
  int deepest = 0;
  for (const auto& item : node.items) deepest = std::max(deepest, Depth(item));
  for (const auto& entry : node.entries) {
    deepest = std::max({deepest, Depth(entry.key), Depth(entry.value)});
  }
  const bool collection = node.kind == ptybox::policy::YamlNode::Kind::kSequence ||
                          node.kind == ptybox::policy::YamlNode::Kind::kMap;
  return deepest + (collection ? 1 : 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using ptybox::policy::PolicyRole;
  const PolicyRole role = data[0] % 2 == 0 ? PolicyRole::kOperator : PolicyRole::kRepository;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const ptybox::policy::YamlLimits limits;
  auto tree = ptybox::policy::ParseBoundedYaml(text, limits);
  if (tree) {
    Check(Depth(*tree) <= limits.max_depth);
    Check(tree->line >= 1 && tree->column >= 1);
  } else {
    Check(!tree.error().message.empty() && tree.error().line >= 1 && tree.error().column >= 1);
  }

  const std::string path = "/nonexistent-ptybox-fuzz/policy.yaml";
  ptybox::policy::ParsedPolicyFile parsed = ptybox::policy::ParsePolicyText(text, path, role);
  if (!tree) Check(!parsed.errors.empty());
  for (const ptybox::Error& error : parsed.errors) {
    Check(error.kind == ptybox::ErrorKind::kPolicyError);
    Check(error.message.starts_with(path + ":"));
  }
  return 0;
}
