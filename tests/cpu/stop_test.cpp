// The stop-string matcher: text before a stop string is emitted whole, and no
// prefix of a stop string ever leaves before it is known not to be one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "engine/stop.h"

namespace hayate {
namespace {

// Pushes `chunks`, collecting everything emitted, and checks after every
// push that the emitted text never ends in a partial stop string that the
// full text continues into a complete one.
std::string run(const std::vector<std::string>& stops, const std::vector<std::string>& chunks,
                bool* stopped = nullptr) {
  StopMatcher m(stops);
  std::string out;
  for (const std::string& c : chunks) {
    out += m.push(c);
    for (const std::string& s : stops) EXPECT_EQ(out.find(s), std::string::npos) << out;
  }
  out += m.flush();
  if (stopped) *stopped = m.stopped();
  return out;
}

TEST(StopMatcher, CutsAtAStopSplitAcrossChunks) {
  bool stopped = false;
  EXPECT_EQ(run({"</s>"}, {"hello <", "/", "s> world"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStartAStop) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abc ST"), "abc ");  // "ST" could begin STOP
  EXPECT_EQ(m.push("A"), "STA");        // "STA" cannot begin STOP: released
  EXPECT_EQ(m.push("abcS"), "abc");
  EXPECT_EQ(m.flush(), "S");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, ReleasesAFalseStartOnceItDiverges) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("xS"), "x");
  EXPECT_EQ(m.push("TX"), "STX");
  EXPECT_EQ(m.push("STO"), "");
  EXPECT_EQ(m.push("P tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(run({"world", "lo w"}, {"hel", "lo wor", "ld"}), "hel");
  EXPECT_EQ(run({"\n\n", "##"}, {"a\n", "b#", "#c\n\n"}), "a\nb");
}

TEST(StopMatcher, StopInsideOneChunkAndMultibyte) {
  EXPECT_EQ(run({"。"}, {"こんにちは。さようなら"}), "こんにちは");
  // A stop string of several UTF-8 bytes split across chunks byte-wise.
  std::string s = "終";
  EXPECT_EQ(run({"終わり"}, {"始まり", s.substr(0, 1), s.substr(1), "わ", "り!"}), "始まり");
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EmptyStopIsAnError) { EXPECT_THROW(StopMatcher({"a", ""}), Error); }

}  // namespace
}  // namespace hayate
