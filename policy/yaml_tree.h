// A bounded YAML reader for untrusted policy files: yaml-cpp's event parser feeds a small tree
// that keeps every node's 1-based position. Depth, node count (aliases included, expanded) and
// tags are bounded here, and so are the bytes of text the tree holds (aliases counted expanded:
// one anchored 1 MB scalar named by 3000 aliases would be 3 GB); no yaml-cpp exception escapes.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptybox::policy {

struct YamlEntry;

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMap };
  Kind kind = Kind::kNull;
  int line = 1;                    // 1-based
  int column = 1;                  // 1-based
  std::string value;               // kScalar: the text
  bool plain = true;               // kScalar: unquoted, not a block literal (so it may be a number)
  std::vector<YamlNode> items;     // kSequence
  std::vector<YamlEntry> entries;  // kMap, in file order
};

// One key and its value in a mapping. A struct rather than std::pair<YamlNode, YamlNode>: clang
// (16, with libstdc++ 12) rejects that pair inside YamlNode's own definition, and the fuzz build
// (scripts/fuzz.sh) uses clang.
struct YamlEntry {
  YamlNode key;
  YamlNode value;
};

struct YamlLimits {
  int max_depth = 16;     // nested collections
  int max_nodes = 10000;  // after expanding aliases
  // Scalar text (keys and values) after expanding aliases. The file itself is at most
  // kMaxPolicyFileBytes, so only aliases can reach this: a file without them never does.
  int64_t max_bytes = 1024 * 1024;
};

struct YamlError {
  int line = 1;
  int column = 1;
  std::string message;
};

// Parses exactly one document. An empty stream (only comments or whitespace) yields a kNull
// root at 1:1. More than one document, explicit tags and every limit breach are errors.
[[nodiscard]] std::expected<YamlNode, YamlError> ParseBoundedYaml(std::string_view text,
                                                                  const YamlLimits& limits = {});

// "a mapping", "a list", "a string", "an empty value": for "expected X, got Y" messages.
std::string_view DescribeKind(const YamlNode& node);

}  // namespace ptybox::policy
