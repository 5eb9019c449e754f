// --reasoning-parser qwen3's split of a chat answer into reasoning_content
// and content, whole and as stream deltas cut anywhere (the tags too).
#include <gtest/gtest.h>

#include <string>

#include "server/reasoning.h"

namespace hayate::server {
namespace {

// The deltas of `text` cut every `step` bytes, pushed and finished.
ReasoningSplitter::Parts streamed(const std::string& text, size_t step) {
  ReasoningSplitter s;
  ReasoningSplitter::Parts all;
  for (size_t i = 0; i < text.size(); i += step) {
    ReasoningSplitter::Parts p = s.push(std::string_view(text).substr(i, step));
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  ReasoningSplitter::Parts p = s.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

TEST(Reasoning, ThinkingThenAnswer) {
  const std::string text = "<think>\nLet me add: 2+2=4.\n</think>\n\nIt is 4.";
  const ReasoningSplitter::Split w = ReasoningSplitter::split(text);
  EXPECT_EQ(w.reasoning, "\nLet me add: 2+2=4.\n");
  EXPECT_EQ(w.content, "\n\nIt is 4.");
  for (size_t step : {1, 2, 3, 7, 100}) {
    const ReasoningSplitter::Parts p = streamed(text, step);
    EXPECT_EQ(p.reasoning, *w.reasoning) << step;
    EXPECT_EQ(p.content, *w.content) << step;
  }
}

TEST(Reasoning, NoThinkingIsAllContent) {
  for (const std::string text : {"Just an answer.", "<thin", "", "a <think>b</think> c"}) {
    const ReasoningSplitter::Split w = ReasoningSplitter::split(text);
    EXPECT_FALSE(w.reasoning) << text;
    EXPECT_EQ(w.content, text);
    for (size_t step : {1, 3}) EXPECT_EQ(streamed(text, step).content, text) << text;
  }
}

TEST(Reasoning, CutOffInsideThinkingOrNothingAfter) {
  ReasoningSplitter::Split w = ReasoningSplitter::split("<think>still thinking </thi");
  EXPECT_EQ(w.reasoning, "still thinking </thi");
  EXPECT_FALSE(w.content);
  EXPECT_EQ(streamed("<think>still thinking </thi", 2).reasoning, "still thinking </thi");
  w = ReasoningSplitter::split("<think>done</think>");
  EXPECT_EQ(w.reasoning, "done");
  EXPECT_FALSE(w.content);
  // A later </think> is content once the first closed the thinking.
  w = ReasoningSplitter::split("<think>a</think>b</think>c");
  EXPECT_EQ(w.reasoning, "a");
  EXPECT_EQ(w.content, "b</think>c");
}

}  // namespace
}  // namespace hayate::server
