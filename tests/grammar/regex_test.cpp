// Regexes: random walks through the mask must match the pattern in full
// under PCRE2 (an independent engine), and finish where the pattern is
// bounded; unsupported constructs are Errors.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/grammar.h"
#include "grammar_util.h"

namespace hayate::test {
namespace {

using namespace hayate::grammar;

// Full match under PCRE2 with UTF (ASCII \d \w \s, as our subset), under
// match and depth limits: a pattern that makes PCRE2 backtrack past them
// fails the test instead of hanging it.
bool pcre2_full_match(const std::string& pattern, const std::string& subject) {
  int err;
  PCRE2_SIZE off;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF,
                                 &err, &off, nullptr);
  if (!re) {
    ADD_FAILURE() << "PCRE2 cannot compile " << pattern;
    return false;
  }
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(ctx, 10'000'000);
  pcre2_set_depth_limit(ctx, 100'000);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, ctx);
  pcre2_match_data_free(md);
  pcre2_match_context_free(ctx);
  pcre2_code_free(re);
  if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT)
    ADD_FAILURE() << "PCRE2 hit its limits on " << pattern << " with " << subject;
  return rc >= 0;
}

struct Case {
  const char* pattern;
  bool bounded;                // every match is short: the walk must finish
  const char* pcre = nullptr;  // the same in PCRE2's syntax, where it differs (\\u)
};

const Case kCases[] = {
    {"[a-z]{3,5}", true},
    {"\\d{3}-\\d{4}", true},
    {"(foo|bar)+baz", false},
    {"[^\\n]{0,10}x", true},
    {"a.b", true},
    {"\\w+@\\w+\\.com", false},
    {"[α-ω]{2}[А-Я]?", true},
    {"(?:ab|cd){2,3}", true},
    {"x*y?z+", false},
    {"^(true|false)$", true},
    {"[+-]?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,2})?", true},
    {"\\S{2}\\s\\D\\W", true},
    {"[\\u00e9\\x41-\\x43\\]\\-]{1,4}", true, "[\\x{e9}\\x41-\\x43\\]\\-]{1,4}"},
    {"(a|ab)(c|bcd)(d*)", false},
    {"(\\d+)+!", false},
    {"\\u{1F600}{1,2}", true, "\\x{1F600}{1,2}"},
};

TEST(GrammarRegex, RandomWalksMatchUnderPcre2) {
  for (const Case& c : kCases) {
    auto t = tables_for(compile_regex(c.pattern));
    for (uint64_t seed = 0; seed < 8; ++seed) {
      Walk w = random_walk(t, seed, 200, 0.4);
      if (c.bounded) {
        EXPECT_TRUE(w.finished) << c.pattern << " seed " << seed << ": " << w.text;
      }
      if (w.finished) {
        EXPECT_TRUE(pcre2_full_match(c.pcre ? c.pcre : c.pattern, w.text)) << c.pattern << " produced " << w.text;
      }
    }
  }
}

// Patterns that are catastrophic for backtracking engines are ordinary
// grammars: with the server's limits and Llama 3's 128k vocabulary they
// compile, a walk's masks are ordinary work, and what it finishes matches
// under PCRE2 (with match limits); (a{1000}){1000} is refused by the
// position limit before anything is built. tests/server/tools_test.cpp
// times compiles and masks and checks the 400s.
TEST(GrammarRegex, CatastrophicPatternsAreOrdinaryGrammars) {
  Limits server;  // src/server/structured.h's StructuredLimits
  server.max_depth = 64;
  server.max_repeat = 4096;
  server.max_elements = 16384;
  server.max_rules = 8192;
  // Each pattern with whether it admits 5,000 a's as a prefix, then a "!".
  struct Case {
    const char* pattern;
    bool as, bang;
  };
  for (const Case& c : {Case{"(a+)+b", true, false}, Case{"(a|aa)*c", true, false},
                        Case{"(.*a){20}", true, true}, Case{"(x+x+)+y", false, false}}) {
    auto t = tables_for(compile_regex(c.pattern, server));  // lazy: a walk builds what it visits
    const Walk w = random_walk(t, 1, 24, 0.5);
    if (w.finished) {
      EXPECT_TRUE(pcre2_full_match(c.pattern, w.text)) << c.pattern << " produced " << w.text;
    }
    // The input that makes a backtracking engine explode is linear work,
    // with the verdicts of the regex.
    GrammarMatcher m(t);
    EXPECT_EQ(m.accept_bytes(std::string(5000, 'a')), c.as) << c.pattern;
    EXPECT_EQ(m.accept_bytes("!"), c.bang) << c.pattern;
  }
  for (const char* p : {"(a{1000}){1000}", "((a{100}){100}){100}"}) {
    try {
      compile_regex(p, server);
      ADD_FAILURE() << p << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos) << e.what();
    }
  }
}

TEST(GrammarRegex, UnsupportedConstructsAreErrors) {
  const std::pair<const char*, const char*> bad[] = {
      {"(?=a)b", "lookaround"}, {"(a)\\1", "backreferences"}, {"(a", "expected )"},
      {"a)", "unexpected ')'"}, {"a{3,2}", "max < min"},      {"[b-a]", "reversed"},
      {"a^b", "anchors"},       {"\\p{L}", "not supported"},   {"*a", "without an operand"},
      {"[[:alpha:]]", "POSIX"}, {"(?<n>a)", "named group"},
  };
  for (auto [p, needle] : bad) {
    try {
      compile_regex(p);
      ADD_FAILURE() << p << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << p << ": " << e.what();
    }
  }
  // Catastrophic backtracking patterns are plain grammars here.
  const Grammar g = compile_regex("(a+)+b");
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  EXPECT_TRUE(m.accept_bytes(std::string(5000, 'a')));
  EXPECT_FALSE(m.accept_bytes("c"));
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace hayate::test
