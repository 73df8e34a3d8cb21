// The bounded YAML reader and the bounded file reader against hostile input: alias bombs,
// deep nesting, huge and endless files, FIFOs, symlinks. Each must end in an error with a
// position, quickly, and never in a crash or an exception.
#include "policy/yaml_tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "policy/file_reader.h"
#include "policy/policy_file.h"
#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

using testing::TempDir;

// The classic "billion laughs": 9 levels of 9 aliases each, 9^9 nodes if expanded naively.
std::string BillionLaughs() {
  std::string text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 9; ++level) {
    const std::string prev = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", " : "") + prev;
    text += "]\n";
  }
  return text;
}

TEST(YamlTreeTest, KeepsOneBasedPositionsAndQuoting) {
  auto tree = ParseBoundedYaml("a: 1\nb:\n  - \"x\"\n  - y\n");
  ASSERT_TRUE(tree.has_value());
  ASSERT_EQ(tree->kind, YamlNode::Kind::kMap);
  ASSERT_EQ(tree->entries.size(), 2u);
  const auto& [b_key, b_value] = tree->entries[1];
  EXPECT_EQ(b_key.value, "b");
  EXPECT_EQ(b_key.line, 2);
  EXPECT_EQ(b_key.column, 1);
  ASSERT_EQ(b_value.items.size(), 2u);
  EXPECT_EQ(b_value.items[0].line, 3);
  EXPECT_EQ(b_value.items[0].column, 5);
  EXPECT_FALSE(b_value.items[0].plain);
  EXPECT_TRUE(b_value.items[1].plain);
}

TEST(YamlTreeTest, AliasBombStopsAtTheNodeBudget) {
  auto tree = ParseBoundedYaml(BillionLaughs());
  ASSERT_FALSE(tree.has_value());
  EXPECT_NE(tree.error().message.find("more than 10000 nodes"), std::string::npos);
  EXPECT_EQ(tree.error().line, 5);  // a4 is the first level past 10000 expanded nodes
}

TEST(YamlTreeTest, AliasBombInAPolicyFileIsAPolicyError) {
  ParsedPolicyFile parsed =
      ParsePolicyText("version: 1\n" + BillionLaughs(), "/x/p.yaml", PolicyRole::kRepository);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].kind, ErrorKind::kPolicyError);
  EXPECT_TRUE(parsed.errors[0].message.starts_with("/x/p.yaml:6:")) << parsed.errors[0].message;
}

// One anchored scalar of ~1 MB named by 3000 aliases: 3001 nodes, well inside the node budget,
// but 3 GB of text if every alias were copied (the daemon grew to ~3 GB on this file). The
// byte budget refuses it at the first alias, before anything is copied.
std::string BigScalarAliasBomb(int aliases) {
  std::string text = "version: 1\nbig: &big " + std::string(1'000'000, 'x') + "\nlist:\n";
  for (int i = 0; i < aliases; ++i) text += "  - *big\n";
  return text;
}

TEST(YamlTreeTest, AliasesAreChargedByTheBytesTheyExpandTo) {
  const std::string text = BigScalarAliasBomb(3000);
  ASSERT_LE(static_cast<int64_t>(text.size()), kMaxPolicyFileBytes);  // a file we do read
  auto tree = ParseBoundedYaml(text);
  ASSERT_FALSE(tree.has_value());
  EXPECT_NE(tree.error().message.find("more than 1048576 bytes of text (aliases counted "
                                      "expanded)"),
            std::string::npos)
      << tree.error().message;
  EXPECT_EQ(tree.error().line, 4);  // the first alias
  EXPECT_EQ(tree.error().column, 5);

  ParsedPolicyFile parsed = ParsePolicyText(text, "/w/.ptybox.yaml", PolicyRole::kRepository);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].kind, ErrorKind::kPolicyError);
  EXPECT_TRUE(
      parsed.errors[0].message.starts_with("/w/.ptybox.yaml:4:5: yaml: the document "
                                           "holds more than"))
      << parsed.errors[0].message.substr(0, 200);
}

TEST(YamlTreeTest, SmallAliasesWithinTheByteBudgetStillExpand) {
  auto tree = ParseBoundedYaml("a: &a [x, yy]\nb: *a\nc: *a\n",
                               YamlLimits{.max_depth = 16, .max_nodes = 100, .max_bytes = 12});
  ASSERT_TRUE(tree.has_value()) << tree.error().message;  // a b c x yy, twice more x yy: 12
  ASSERT_EQ(tree->entries.size(), 3u);
  EXPECT_EQ(tree->entries[2].value.items[1].value, "yy");
  auto over = ParseBoundedYaml("a: &a [x, yy]\nb: *a\nc: *a\n",
                               YamlLimits{.max_depth = 16, .max_nodes = 100, .max_bytes = 11});
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().line, 3);
}

TEST(YamlTreeTest, LongFlatListStopsAtTheNodeBudget) {
  std::string text = "a:\n";
  for (int i = 0; i < 20000; ++i) text += "- x\n";
  auto tree = ParseBoundedYaml(text);
  ASSERT_FALSE(tree.has_value());
  EXPECT_EQ(tree.error().line, 9999);  // the map, its key, the list, 9997 items fit
}

TEST(YamlTreeTest, DeepNestingIsRefusedBeforeTheParserRecursesFar) {
  for (const std::string& open : {std::string("["), std::string("{a: ")}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    auto tree = ParseBoundedYaml(text);
    ASSERT_FALSE(tree.has_value());
    EXPECT_EQ(tree.error().message,
              "collections are nested more than 16 levels deep; a policy needs at most 3");
    EXPECT_EQ(tree.error().line, 1);
  }
  std::string block;
  for (int i = 0; i < 40; ++i) block += std::string(2 * i, ' ') + "k" + std::to_string(i) + ":\n";
  auto tree = ParseBoundedYaml(block);
  ASSERT_FALSE(tree.has_value());
  EXPECT_EQ(tree.error().line, 17);
}

TEST(YamlTreeTest, CustomLimitsApply) {
  auto tree = ParseBoundedYaml("[[1]]", YamlLimits{.max_depth = 1, .max_nodes = 100});
  ASSERT_FALSE(tree.has_value());
  EXPECT_EQ(tree.error().column, 2);
  EXPECT_TRUE(ParseBoundedYaml("[[1]]", YamlLimits{.max_depth = 2, .max_nodes = 3}).has_value());
  EXPECT_FALSE(ParseBoundedYaml("[[1]]", YamlLimits{.max_depth = 2, .max_nodes = 2}).has_value());
}

TEST(YamlTreeTest, MalformedInputsNeverThrow) {
  const char* inputs[] = {
      "a: [",
      "a: {",
      "\"unterminated",
      "'x",
      "a: *nowhere",
      "&a",
      "- - - -",
      ": :",
      "? ? ?",
      "%YAML 1.2\n%YAML 1.2\n---\na: 1",
      "a: b: c",
      "\xff\xfe\x00",
      "[1, 2]]",
      "{a: 1}}",
      "!<x> a",
      "a: |\n  x\n b",
      "---\n...\n---\n",
      "\t\t",
      "a:\n\t- b",
  };
  for (const char* input : inputs) {
    auto tree = ParseBoundedYaml(input);
    if (!tree) {
      EXPECT_GE(tree.error().line, 1) << input;
      EXPECT_GE(tree.error().column, 1) << input;
      EXPECT_FALSE(tree.error().message.empty()) << input;
    }
    ParsedPolicyFile parsed = ParsePolicyText(input, "/x/p.yaml", PolicyRole::kOperator);
    EXPECT_FALSE(parsed.errors.empty()) << input;
  }
}

TEST(FileReaderTest, ReadsARegularFile) {
  TempDir dir;
  auto path = dir.File("p.yaml", "version: 1\n");
  auto text = ReadPolicyFile(path, {});
  ASSERT_TRUE(text.has_value()) << text.error().message;
  EXPECT_EQ(**text, "version: 1\n");
}

TEST(FileReaderTest, MissingIsAbsentOnlyWhenAllowed) {
  TempDir dir;
  auto absent = ReadPolicyFile(dir.path() / "none.yaml", ReadOptions{.missing_ok = true});
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
  auto missing = ReadPolicyFile(dir.path() / "none.yaml", {});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().kind, ErrorKind::kPolicyError);
  EXPECT_EQ(missing.error().message,
            "open " + (dir.path() / "none.yaml").string() + ": No such file or directory");
}

TEST(FileReaderTest, RefusesFilesOverOneMebibyte) {
  TempDir dir;
  auto exact = dir.File("exact.yaml", "#" + std::string(kMaxPolicyFileBytes - 1, 'x'));
  EXPECT_TRUE(ReadPolicyFile(exact, {}).has_value());
  auto big = dir.File("big.yaml", "#" + std::string(kMaxPolicyFileBytes, 'x'));
  auto text = ReadPolicyFile(big, {});
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().message,
            big.string() +
                ": is larger than 1048576 bytes (1 MiB), the limit for a policy "
                "file; a policy needs a few hundred bytes");
}

TEST(FileReaderTest, ARepositoryFileIsRefusedOver64KibWhereAnOperatorsIsRead) {
  TempDir dir;
  const std::string text = "version: 1\n#" + std::string(kMaxRepositoryPolicyFileBytes, 'x');
  auto file = dir.File("policy.yaml", text);
  auto repository = ReadPolicyFile(file, ReadOptions::For(PolicyRole::kRepository, false));
  ASSERT_FALSE(repository.has_value());
  EXPECT_EQ(repository.error().message,
            file.string() +
                ": is larger than 65536 bytes (64 KiB), the limit for a repository's policy "
                "file; a policy needs a few hundred bytes");
  auto operator_file = ReadPolicyFile(file, ReadOptions::For(PolicyRole::kOperator, false));
  ASSERT_TRUE(operator_file.has_value());
  ASSERT_TRUE(operator_file->has_value());
  EXPECT_EQ(**operator_file, text);
  auto exact = dir.File("exact.yaml", std::string(kMaxRepositoryPolicyFileBytes, '#'));
  EXPECT_TRUE(ReadPolicyFile(exact, ReadOptions::For(PolicyRole::kRepository, false)));
}

// The role travels in ReadOptions, not in the cap's value: the message names whose file it is,
// whatever the cap, and the cap is checked again on the read of an opened file.
TEST(FileReaderTest, TheSizeMessageNamesTheRoleTheOptionsCarry) {
  TempDir dir;
  auto big = dir.File("big.yaml", "#" + std::string(kMaxPolicyFileBytes, 'x'));
  auto operator_file = ReadPolicyFile(big, ReadOptions::For(PolicyRole::kOperator, false));
  ASSERT_FALSE(operator_file.has_value());
  EXPECT_EQ(operator_file.error().message,
            big.string() +
                ": is larger than 1048576 bytes (1 MiB), the limit for an operator's policy "
                "file; a policy needs a few hundred bytes");
  ReadOptions small = ReadOptions::For(PolicyRole::kRepository, false);
  small.max_bytes = 1024;
  auto file = dir.File("policy.yaml", std::string(2048, '#'));
  auto repository = ReadPolicyFile(file, small);
  ASSERT_FALSE(repository.has_value());
  EXPECT_EQ(repository.error().message,
            file.string() +
                ": is larger than 1024 bytes (1 KiB), the limit for a repository's policy "
                "file; a policy needs a few hundred bytes");
}

TEST(FileReaderTest, RefusesEndlessDevicesAndFifosWithoutBlocking) {
  auto zero = ReadPolicyFile("/dev/zero", {});
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message,
            "/dev/zero: is not a regular file; a policy must be a plain YAML file");
  TempDir dir;
  const auto fifo = dir.path() / "fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto text = ReadPolicyFile(fifo, {});  // O_NONBLOCK: no writer, no hang
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.error().message.find("is not a regular file"), std::string::npos);
  auto directory = ReadPolicyFile(dir.path(), {});
  ASSERT_FALSE(directory.has_value());
  EXPECT_NE(directory.error().message.find("is not a regular file"), std::string::npos);
}

TEST(FileReaderTest, CanRefuseToFollowASymlink) {
  TempDir dir;
  auto target = dir.File("secret", "root:x:0:0\n");
  const auto link = dir.path() / ".ptybox.yaml";
  std::filesystem::create_symlink(target, link);
  auto followed = ReadPolicyFile(link, ReadOptions{.follow_symlinks = true});
  ASSERT_TRUE(followed.has_value());
  auto refused = ReadPolicyFile(link, ReadOptions{.follow_symlinks = false, .missing_ok = true});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message,
            link.string() +
                ": is a symbolic link; a repository policy must be a regular file "
                "in the workspace (replace the link with the file itself)");
  // A dangling link is refused too, not mistaken for "absent".
  std::filesystem::remove(target);
  EXPECT_FALSE(
      ReadPolicyFile(link, ReadOptions{.follow_symlinks = false, .missing_ok = true}).has_value());
}

TEST(FileReaderTest, OnlyAMissingFileCountsAsAbsent) {
  // A parent that is a file (ENOTDIR) is an error even when missing files are fine: anything
  // but a plain "no such file" must fail closed rather than silently drop the operator policy.
  TempDir dir;
  auto not_a_dir = dir.File("etc-ptybox", "x");
  auto text = ReadPolicyFile(not_a_dir / "policy.yaml", ReadOptions{.missing_ok = true});
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().message,
            "open " + (not_a_dir / "policy.yaml").string() + ": Not a directory");
}

}  // namespace
}  // namespace ptybox::policy
