#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bench/workload.h"
#include "core/check.h"

namespace hayate::bench {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("hayate_bench_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST(Workload, SameIsTheArticlePromptTenTimes) {
  Workload w = make_workload("same", 0);
  EXPECT_EQ(w.trial, "same");
  ASSERT_EQ(w.prompts.size(), 1u);
  EXPECT_EQ(w.prompts[0], "なぜ犬はこんなにもかわいいの?");
  EXPECT_EQ(w.runs, 10);
  EXPECT_EQ(w.prompt_for_run(9), w.prompts[0]);
}

TEST(Workload, BuiltinPromptsMatchTheShippedFiles) {
  const std::string dir = std::string(HAYATE_SOURCE_DIR) + "/bench/prompts/";
  EXPECT_EQ(make_workload("same", 0).prompts, split_prompt_lines(read_file(dir + "same.txt")));
  EXPECT_EQ(make_workload("varied", 0).prompts,
            split_prompt_lines(read_file(dir + "varied.txt")));
}

TEST(Workload, VariedHasElevenDistinctPromptsOneRunEach) {
  Workload w = make_workload("varied", 0);
  EXPECT_EQ(w.trial, "varied");
  ASSERT_EQ(w.prompts.size(), 11u);
  EXPECT_EQ(std::set<std::string>(w.prompts.begin(), w.prompts.end()).size(), 11u);
  EXPECT_EQ(w.runs, 11);
  Workload more = make_workload("varied", 13);  // cycles
  EXPECT_EQ(more.prompt_for_run(11), w.prompts[0]);
  EXPECT_EQ(more.prompt_for_run(12), w.prompts[1]);
}

TEST(Workload, SplitLinesSkipsBlanksAndCarriageReturns) {
  auto p = split_prompt_lines("a\r\n\n  \nb c\nlast");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "a");
  EXPECT_EQ(p[1], "b c");
  EXPECT_EQ(p[2], "last");
}

TEST(Workload, FilesOfLinesOrJson) {
  Workload lines = make_workload(temp_file("lines.txt", "one\ntwo\n"), 0);
  EXPECT_EQ(lines.trial, "file");
  EXPECT_EQ(lines.prompts, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(lines.runs, 2);
  Workload arr = make_workload(temp_file("arr.json", "[\"x\", \"y\\nz\"]"), 5);
  EXPECT_EQ(arr.prompts, (std::vector<std::string>{"x", "y\nz"}));  // JSON keeps newlines
  EXPECT_EQ(arr.runs, 5);
  Workload obj = make_workload(temp_file("obj.json", "{\"prompts\": [\"p\"]}"), 0);
  EXPECT_EQ(obj.prompts, (std::vector<std::string>{"p"}));
}

TEST(Workload, BadFilesAreOneLineErrors) {
  EXPECT_THROW(make_workload("/nonexistent/prompts.txt", 0), Error);
  EXPECT_THROW(make_workload(temp_file("empty.txt", "\n\n"), 0), Error);
  EXPECT_THROW(make_workload(temp_file("bad.json", "[\"a\", 3]"), 0), Error);
  EXPECT_THROW(make_workload(temp_file("broken.json", "[\"a\""), 0), Error);
  EXPECT_THROW(make_workload(temp_file("noprompts.json", "{\"x\": 1}"), 0), Error);
}

}  // namespace
}  // namespace hayate::bench
