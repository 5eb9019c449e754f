// The switch table: defaults, every allowed value, and a one-line error
// naming the variable and its values for anything else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "core/check.h"
#include "core/switches.h"

namespace hayate {
namespace {

void clear() {
  for (const SwitchInfo& s : switch_table()) unsetenv(std::string(s.env).c_str());
}

TEST(Switches, DefaultsAreTheWinners) {
  clear();
  const Switches s = Switches::from_environment();
  EXPECT_EQ(s.sampler, SamplerPath::kAuto);
  EXPECT_EQ(s.persistent, PersistentMode::kOn);
  EXPECT_EQ(s.gemm, GemmPath::kLt);
}

TEST(Switches, EveryAllowedValueParses) {
  clear();
  setenv("HAYATE_BATCH_SAMPLER", "rows", 1);
  setenv("HAYATE_BATCH_PERSISTENT", "refuse-trial", 1);
  setenv("HAYATE_BATCH_GEMM", "ex16", 1);
  Switches s = Switches::from_environment();
  EXPECT_EQ(s.sampler, SamplerPath::kRows);
  EXPECT_EQ(s.persistent, PersistentMode::kRefuseTrial);
  EXPECT_EQ(s.gemm, GemmPath::kEx16);
  setenv("HAYATE_BATCH_SAMPLER", "batched", 1);
  setenv("HAYATE_BATCH_PERSISTENT", "0", 1);
  setenv("HAYATE_BATCH_GEMM", "ex", 1);
  s = Switches::from_environment();
  EXPECT_EQ(s.sampler, SamplerPath::kBatched);
  EXPECT_EQ(s.persistent, PersistentMode::kOff);
  EXPECT_EQ(s.gemm, GemmPath::kEx);
  clear();
}

TEST(Switches, AnythingElseNamesTheVariableAndItsValues) {
  for (const SwitchInfo& info : switch_table()) {
    clear();
    const std::string env(info.env);
    for (const char* bad : {"", "fast", "ro", "rowsx", "1 "}) {
      setenv(env.c_str(), bad, 1);
      try {
        (void)Switches::from_environment();
        ADD_FAILURE() << env << "='" << bad << "' was accepted";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(env), std::string::npos) << m;
        EXPECT_NE(m.find(std::string(info.values)), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      }
    }
  }
  clear();
}

TEST(Switches, DeclaredOnceEach) {
  std::set<std::string> names;
  for (const SwitchInfo& s : switch_table()) {
    EXPECT_TRUE(names.insert(std::string(s.env)).second) << s.env;
    EXPECT_FALSE(s.meaning.empty());
  }
  EXPECT_EQ(names.size(), 3u);
}

}  // namespace
}  // namespace hayate
