// Event-driven construction of YamlNode trees with hard bounds. yaml-cpp reports aliases as
// events instead of shared nodes here, so an alias is expanded by copying and charged to the
// node and byte budgets (what it expands to) before the copy is made: an alias bomb stops at
// the budget, not at memory, and no copy is ever larger than what the budget still allows.
#include "policy/yaml_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <exception>
#include <map>
#include <new>
#include <optional>
#include <sstream>
#include <string_view>

#include "policy/schema.h"

namespace ptybox::policy {
namespace {

// Thrown from the event handler to stop yaml-cpp mid-document; caught in ParseBoundedYaml.
struct Stop {
  YamlError error;
};

class TreeBuilder final : public YAML::EventHandler {
 public:
  explicit TreeBuilder(const YamlLimits& limits) : limits_(limits) {}

  std::optional<YamlNode>& root() { return root_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      Fail(mark,
           "a policy file holds one YAML document; remove the second `---` and what "
           "follows it");
    }
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    YamlNode node = Make(mark, YamlNode::Kind::kNull);
    Complete(std::move(node), anchor, 1, 0);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) {
      Fail(mark,
           "this alias refers to an anchor that is not complete yet; an alias may only "
           "name an anchor defined earlier");
    }
    const Anchored& anchored = found->second;
    Charge(mark, anchored.nodes);
    ChargeBytes(mark, anchored.bytes);
    YamlNode copy = anchored.node;
    copy.line = Line(mark);
    copy.column = Column(mark);
    Attach(std::move(copy), mark);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    CheckTag(mark, tag);
    YamlNode node = Make(mark, YamlNode::Kind::kScalar);
    const auto bytes = static_cast<int64_t>(value.size());
    ChargeBytes(mark, bytes);
    node.value = value;
    node.plain = tag == "?";
    Complete(std::move(node), anchor, 1, bytes);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    Open(mark, tag, anchor, YamlNode::Kind::kSequence);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    Open(mark, tag, anchor, YamlNode::Kind::kMap);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    YamlNode node;
    YAML::anchor_t anchor = 0;
    int first_node = 0;      // nodes_ when the collection opened, to size it for anchors
    int64_t first_byte = 0;  // bytes_ then, likewise
    std::optional<YamlNode> pending_key;
  };
  // An anchored node with what it costs each time an alias names it.
  struct Anchored {
    YamlNode node;
    int nodes = 0;
    int64_t bytes = 0;
  };

  static int Line(const YAML::Mark& mark) { return mark.is_null() ? 1 : mark.line + 1; }
  static int Column(const YAML::Mark& mark) { return mark.is_null() ? 1 : mark.column + 1; }

  [[noreturn]] static void Fail(const YAML::Mark& mark, std::string message) {
    throw Stop{YamlError{Line(mark), Column(mark), std::move(message)}};
  }

  YamlNode Make(const YAML::Mark& mark, YamlNode::Kind kind) {
    Charge(mark, 1);
    YamlNode node;
    node.kind = kind;
    node.line = Line(mark);
    node.column = Column(mark);
    return node;
  }

  void Charge(const YAML::Mark& mark, int count) {
    if (count > limits_.max_nodes - nodes_) {
      Fail(mark, "the document has more than " + std::to_string(limits_.max_nodes) +
                     " nodes (aliases counted expanded); a policy needs a few dozen, so this "
                     "looks like an alias bomb or a file that is not a policy");
    }
    nodes_ += count;
  }

  void ChargeBytes(const YAML::Mark& mark, int64_t count) {
    if (count > limits_.max_bytes - bytes_) {
      Fail(mark, "the document holds more than " + std::to_string(limits_.max_bytes) +
                     " bytes of text (aliases counted expanded); a policy needs a few hundred, "
                     "so this looks like an alias bomb or a file that is not a policy");
    }
    bytes_ += count;
  }

  static void CheckTag(const YAML::Mark& mark, const std::string& tag) {
    // "?" marks a plain node, "!" a quoted or block one; anything else was written explicitly.
    if (tag != "?" && tag != "!") {
      constexpr std::string_view kCore = "tag:yaml.org,2002:";
      const std::string shown =
          Printable(tag.starts_with(kCore) ? "!!" + tag.substr(kCore.size()) : tag, 40);
      Fail(mark, "explicit YAML tags (here `" + shown + "`) are not supported; remove the tag");
    }
  }

  void Open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
            YamlNode::Kind kind) {
    CheckTag(mark, tag);
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      Fail(mark, "collections are nested more than " + std::to_string(limits_.max_depth) +
                     " levels deep; a policy needs at most 3");
    }
    int first = nodes_;
    Frame frame{Make(mark, kind), anchor, first, bytes_, std::nullopt};
    stack_.push_back(std::move(frame));
  }

  void Close() {
    if (stack_.empty()) return;  // unbalanced events cannot come from yaml-cpp; stay safe
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    if (frame.pending_key) {
      // yaml-cpp always sends a value (null) after a key; keep the tree consistent anyway.
      frame.node.entries.emplace_back(std::move(*frame.pending_key), YamlNode{});
    }
    Complete(std::move(frame.node), frame.anchor, nodes_ - frame.first_node,
             bytes_ - frame.first_byte);
  }

  void Complete(YamlNode node, YAML::anchor_t anchor, int nodes, int64_t bytes) {
    if (anchor != 0) anchors_[anchor] = Anchored{node, nodes, bytes};
    YAML::Mark mark;
    mark.line = node.line - 1;
    mark.column = node.column - 1;
    Attach(std::move(node), mark);
  }

  void Attach(YamlNode node, const YAML::Mark& mark) {
    if (stack_.empty()) {
      root_ = std::move(node);
      return;
    }
    Frame& parent = stack_.back();
    if (parent.node.kind == YamlNode::Kind::kSequence) {
      parent.node.items.push_back(std::move(node));
      return;
    }
    if (!parent.pending_key) {
      if (node.kind != YamlNode::Kind::kScalar) {
        Fail(mark, "a mapping key must be a plain name, not " + std::string(DescribeKind(node)));
      }
      parent.pending_key = std::move(node);
      return;
    }
    parent.node.entries.emplace_back(std::move(*parent.pending_key), std::move(node));
    parent.pending_key.reset();
  }

  const YamlLimits& limits_;
  int documents_ = 0;
  int nodes_ = 0;
  int64_t bytes_ = 0;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::optional<YamlNode> root_;
};

// 1-based number of the first line whose indentation contains a tab, or 0.
int FirstTabIndentedLine(std::string_view text) {
  int line = 1;
  bool in_indent = true;
  for (char c : text) {
    if (c == '\n') {
      ++line;
      in_indent = true;
    } else if (in_indent && c == '\t') {
      return line;
    } else if (c != ' ') {
      in_indent = false;
    }
  }
  return 0;
}

}  // namespace

std::string_view DescribeKind(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kNull:
      return "an empty value";
    case YamlNode::Kind::kScalar:
      return node.plain ? "a scalar" : "a string";
    case YamlNode::Kind::kSequence:
      return "a list";
    case YamlNode::Kind::kMap:
      return "a mapping";
  }
  return "a node";
}

std::expected<YamlNode, YamlError> ParseBoundedYaml(std::string_view text,
                                                    const YamlLimits& limits) {
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    TreeBuilder builder(limits);
    // The second call only finds out whether another document follows (the builder stops it).
    if (parser.HandleNextDocument(builder)) parser.HandleNextDocument(builder);
    if (!builder.root()) return YamlNode{};
    return std::move(*builder.root());
  } catch (const Stop& stop) {
    return std::unexpected(stop.error);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    int column = e.mark.is_null() ? 1 : e.mark.column + 1;
    std::string message = "invalid YAML: " + e.msg;
    if (int tab_line = FirstTabIndentedLine(text); tab_line > 0) {
      message += " (line " + std::to_string(tab_line) +
                 " is indented with a tab; YAML indentation must use spaces)";
    }
    return std::unexpected(YamlError{line, column, std::move(message)});
  } catch (const std::bad_alloc&) {
    return std::unexpected(YamlError{1, 1, "out of memory while reading YAML"});
  } catch (const std::exception& e) {
    return std::unexpected(YamlError{1, 1, std::string("invalid YAML: ") + e.what()});
  } catch (...) {
    return std::unexpected(YamlError{1, 1, "invalid YAML: unexpected parser failure"});
  }
}

}  // namespace ptybox::policy
