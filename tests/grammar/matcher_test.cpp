// The matcher: incremental acceptance, rollback, EOS only at accepting
// states, Unicode and byte-fallback tokens, tokens spanning terminals, and
// the token mask against its definition (brute force over the vocabulary).
#include <algorithm>

#include "grammar/grammar.h"
#include "grammar_util.h"

namespace hayate::test {
namespace {

using namespace hayate::grammar;

std::shared_ptr<const Grammar> ebnf(const char* text) {
  return std::make_shared<const Grammar>(compile_ebnf(text));
}

TEST(GrammarMatcher, AcceptsIncrementallyAndEndsOnlyWhenComplete) {
  GrammarMatcher m(ebnf(R"(root ::= "ab" [0-9]+ ( "x" | "yz" ))"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("b"));
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("b1"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("23"));
  EXPECT_FALSE(m.accept_bytes("yx"));  // all or nothing: "y" alone was fine
  EXPECT_TRUE(m.accept_bytes("y"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("z"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("z"));
  EXPECT_EQ(m.steps(), 5u);
}

TEST(GrammarMatcher, RollbackRestoresEarlierStates) {
  GrammarMatcher m(ebnf(R"(root ::= "a"+ "b" | "c")"));
  ASSERT_TRUE(m.accept_bytes("a"));
  ASSERT_TRUE(m.accept_bytes("a"));
  ASSERT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
  m.rollback(2);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
  m.reset();
  EXPECT_EQ(m.steps(), 0u);
  EXPECT_TRUE(m.accept_bytes("c"));
  EXPECT_THROW(m.rollback(2), Error);
}

// A four-token vocabulary: "a", "b", "ab", EOS (id 3), and a special token.
std::shared_ptr<const TokenVocab> tiny_vocab() {
  return std::make_shared<const TokenVocab>(std::vector<std::string>{"a", "b", "ab", "", "<s>"},
                                            std::vector<bool>{false, false, false, true, true},
                                            std::vector<int32_t>{3});
}

TEST(GrammarMatcher, EosOnlyAtAcceptingStatesAndSpecialTokensNever) {
  auto t = std::make_shared<const TokenTables>(ebnf(R"(root ::= ("ab")+)"), tiny_vocab());
  GrammarMatcher m(t);
  std::vector<uint32_t> mask;
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], 0b101u);  // "a", "ab"
  EXPECT_FALSE(m.accept_token(3));
  EXPECT_FALSE(m.accept_token(4));
  ASSERT_TRUE(m.accept_token(0));
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], 0b010u);  // "b"
  ASSERT_TRUE(m.accept_token(1));
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], 0b1101u);  // "a", "ab", EOS
  EXPECT_TRUE(m.accept_token(3));
  EXPECT_TRUE(m.terminated());
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], 0u);
  EXPECT_FALSE(m.accept_token(0));
  m.rollback(1);
  EXPECT_TRUE(m.can_end());
  EXPECT_THROW(m.accept_token(5), Error);
}

TEST(GrammarMatcher, Llama3TokensSpanSeveralTerminals) {
  auto t = tables_for(compile_ebnf(R"(root ::= "{" "\"" [a-z]+ "\"" ":" [0-9]+ "}")"), llama3_vocab(),
                      TokenTables::Build::kEager);
  GrammarMatcher m(t);
  const std::string text = R"({"abc":123})";
  const auto ids = llama3().encode(text, false);
  ASSERT_LT(ids.size(), text.size());  // some token covers several terminals
  std::vector<uint32_t> mask;
  for (int32_t id : ids) {
    m.fill_mask(mask);
    EXPECT_TRUE(bit(mask, id)) << llama3().decode(std::vector<int32_t>{id});
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.can_end());
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, llama3_eos()[0]));
}

TEST(GrammarMatcher, UnicodeClassesAcceptSplitCharacters) {
  // U+03B1..U+03C9 are CE B1 .. CF 89 in UTF-8.
  auto t = tables_for(compile_ebnf(R"(root ::= [α-ω]+ "!")"));
  GrammarMatcher m(t);
  const TokenVocab& v = t->vocab();
  int32_t lead = -1;
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.usable(id) && v.bytes(id) == "\xCE") lead = id;
  ASSERT_GE(lead, 0) << "Llama 3 has a token for every byte";
  std::vector<uint32_t> mask;
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, lead));
  EXPECT_EQ(mask, brute_mask(m));
  ASSERT_TRUE(m.accept_token(lead));
  m.fill_mask(mask);
  EXPECT_EQ(mask, brute_mask(m));
  for (int32_t id = 0; id < v.size(); ++id) {
    if (!bit(mask, id)) continue;
    const auto c = static_cast<uint8_t>(v.bytes(id)[0]);
    EXPECT_TRUE(c >= 0xB1 && c <= 0xBF) << "token " << id << " after CE";
  }
  const auto ids = llama3().encode("αβγ!", false);
  GrammarMatcher m2(t);
  for (int32_t id : ids) ASSERT_TRUE(m2.accept_token(id));
  EXPECT_TRUE(m2.can_end());
}

TEST(GrammarMatcher, ByteFallbackTokensAreTheirByte) {
  const Tokenizer& tok = llama2();
  auto v = std::make_shared<const TokenVocab>(TokenVocab::from_tokenizer(tok, {2}));
  const auto e2 = tok.token_to_id("<0xE2>").value();
  EXPECT_EQ(v->bytes(e2), "\xE2");
  EXPECT_EQ(v->bytes(tok.token_to_id("\xE2\x96\x81the").value()), " the");
  EXPECT_FALSE(v->usable(1));  // <s>
  // "€" (E2 82 AC) only through byte tokens or a token of its own.
  auto t = tables_for(compile_ebnf(R"(root ::= "€" [0-9])"), v);
  GrammarMatcher m(t);
  std::vector<uint32_t> mask;
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, e2));
  EXPECT_EQ(mask, brute_mask(m));
  for (uint64_t seed = 0; seed < 5; ++seed) {
    Walk w = random_walk(t, seed, 20);
    EXPECT_TRUE(w.finished);
    EXPECT_EQ(w.text.substr(0, 3), "€");
    EXPECT_EQ(w.text.size(), 4u);
  }
}

// Along random walks, the precomputed mask equals the brute-force one.
TEST(GrammarMatcher, MaskMatchesBruteForce) {
  const char* schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 3}, "n": {"type": "integer", "minimum": -5, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 2}},
      "required": ["name"]})";
  std::vector<std::shared_ptr<const TokenTables>> grammars = {
      tables_for(compile_json_schema(std::string_view(schema))),
      tables_for(compile_json_object()),
      tables_for(compile_ebnf(R"(root ::= item ("," item)*
item ::= "\"" [a-z ]* "\"" | [0-9]+ | "[" root "]")")),
  };
  for (size_t g = 0; g < grammars.size(); ++g) {
    GrammarMatcher m(grammars[g]);
    std::mt19937_64 rng(g);
    std::vector<uint32_t> mask;
    for (int step = 0; step < 6; ++step) {
      m.fill_mask(mask);
      ASSERT_EQ(mask, brute_mask(m)) << "grammar " << g << " step " << step;
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < static_cast<int32_t>(mask.size() * 32); ++id)
        if (bit(mask, id) && !m.vocab().is_eos(id)) ids.push_back(id);
      if (ids.empty()) break;
      ASSERT_TRUE(m.accept_token(ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)]));
    }
  }
}

}  // namespace
}  // namespace hayate::test
