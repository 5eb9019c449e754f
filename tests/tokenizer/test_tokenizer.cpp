// Tokenizer basics and added-token handling (lstrip/rstrip against the
// tokenizers.js oracle; single_word and normalized by their defining
// properties, which tokenizers.js does not implement).
#include <algorithm>
#include <filesystem>

#include <atomic>
#include <thread>

#include "tok_test_util.h"
#include "tokenizer/regex.h"

namespace hayate::test {
namespace {

TEST(Tokenizer, Llama3Basics) {
  const Tokenizer& tok = llama3();
  EXPECT_EQ(tok.bos_id(), std::optional<int32_t>(128000));
  EXPECT_EQ(tok.token_to_id("<|eot_id|>"), std::optional<int32_t>(128009));
  EXPECT_TRUE(tok.is_special(128009));
  EXPECT_FALSE(tok.is_special(9906));
  auto ids = tok.encode("Hello<|eot_id|>", true);
  ASSERT_EQ(ids.front(), 128000);
  EXPECT_EQ(tok.decode(ids, false), "<|begin_of_text|>Hello<|eot_id|>");
  EXPECT_EQ(tok.decode(ids, true), "Hello");
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{128000});
}

TEST(Tokenizer, EncodeIsThreadSafe) {
  const Tokenizer& tok = llama3();
  auto texts = json_lines(slurp(data_dir() + "/corpus.jsonl"));
  std::vector<std::vector<int32_t>> expect;
  for (const auto& t : texts) expect.push_back(tok.encode(t.get<std::string>()));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (size_t i = 0; i < texts.size(); ++i)
        if (tok.encode(texts[i].get<std::string>()) != expect[i]) ++bad;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// The real Llama 3.1 tokenizer.json plus added tokens with lstrip/rstrip.
std::string write_strip_tokenizer() {
  auto j = nlohmann::json::parse(slurp(assets_llama3() + "/tokenizer.json"));
  auto add = [&](int id, const char* content, bool l, bool r) {
    j["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false},
                                 {"lstrip", l}, {"rstrip", r}, {"normalized", false}, {"special", true}});
  };
  add(128256, "<L>", true, false);
  add(128257, "<R>", false, true);
  add(128258, "<LR>", true, true);
  std::string dir = std::string(HAYATE_BINARY_DIR) + "/tokenizer_strip_fixture";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << j.dump();
  std::filesystem::copy_file(assets_llama3() + "/tokenizer_config.json", dir + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

TEST(Tokenizer, LstripRstripMatchTokenizersJs) {
  std::string dir = write_strip_tokenizer();
  std::vector<std::string> texts = {"a <L> b", "a  <L>b", "a<R>   b", "x \n<LR>\t y", "<L>", "  <R>  ",
                                    "<LR><LR>", "日本 <L> 語 <R> ！", "a <L><R> b", "\u3000<LR>\u3000z"};
  std::string file = dir + "/texts.jsonl";
  {
    std::ofstream f(file);
    for (const auto& t : texts) f << nlohmann::json(t).dump() << "\n";
  }
  auto expected = json_lines(run_command("node " + oracle_dir() + "/tokenize_oracle.mjs " + dir + " " + file));
  ASSERT_EQ(expected.size(), texts.size());
  Tokenizer tok = Tokenizer::load(dir);
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(tok.encode(texts[i], true), expected[i]["bos"].get<std::vector<int32_t>>()) << texts[i];
}

nlohmann::json char_tokenizer() {
  // Byte-level BPE over a few letters, with added tokens of each kind.
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (const char* t : {"a", "b", "c", "w", "o", "r", "d", "x", "y", "\xC4\xA0", "n", "m"}) vocab[t] = id++;
  return {{"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens",
           {{{"id", 100}, {"content", "word"}, {"single_word", true}, {"special", false}, {"normalized", false}},
            {{"id", 101}, {"content", "norm"}, {"normalized", true}, {"special", false}}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
}

TEST(Tokenizer, SingleWordOnlyMatchesWholeWords) {
  Tokenizer tok = Tokenizer::from_json(char_tokenizer().dump(), "");
  auto has = [&](const std::string& s) {
    auto ids = tok.encode(s, false);
    return std::find(ids.begin(), ids.end(), 100) != ids.end();
  };
  EXPECT_TRUE(has("word"));
  EXPECT_TRUE(has("a word b"));
  EXPECT_FALSE(has("xwordy"));
  EXPECT_FALSE(has("words"));
  EXPECT_FALSE(has("aword"));
  EXPECT_EQ(tok.decode(tok.encode("xwordy a word", false)), "xwordy a word");
}

TEST(Tokenizer, NormalizedAddedTokensMatchAfterTheNormalizer) {
  auto j = char_tokenizer();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "m"}}}, {"content", "n"}};
  Tokenizer tok = Tokenizer::from_json(j.dump(), "");
  auto ids = tok.encode("morm", false);  // normalizes to "norm"
  EXPECT_EQ(ids, std::vector<int32_t>{101});
  ids = tok.encode("norm", false);
  EXPECT_EQ(ids, std::vector<int32_t>{101});
}

}  // namespace
}  // namespace hayate::test

namespace hayate::test {
namespace {

// HF tokenizers runs Split regexes with Oniguruma, whose \s is Unicode
// White_Space; PCRE2's and JavaScript's differ (U+0085, U+FEFF), so the
// pattern is rewritten. The reference here is the White_Space property list
// (Unicode PropList.txt), not an implementation.
TEST(Tokenizer, RegexWhitespaceIsUnicodeWhiteSpace) {
  Regex space("\\s", false), not_space("\\S", false), in_class("[^\\s\\p{L}]", false);
  std::vector<std::pair<size_t, size_t>> m;
  for (const char* ws : {"\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a",
                         "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"}) {
    space.find_all(ws, m);
    EXPECT_EQ(m.size(), 1u) << nlohmann::json(ws).dump();
    not_space.find_all(ws, m);
    EXPECT_TRUE(m.empty()) << nlohmann::json(ws).dump();
    in_class.find_all(ws, m);
    EXPECT_TRUE(m.empty()) << nlohmann::json(ws).dump();
  }
  for (const char* other : {"\ufeff", "\u200b", "\u180e", "\u001c", "x", "\u00ad"}) {
    space.find_all(other, m);
    EXPECT_TRUE(m.empty()) << nlohmann::json(other).dump();
    not_space.find_all(other, m);
    EXPECT_EQ(m.size(), 1u) << nlohmann::json(other).dump();
  }
  EXPECT_EQ(translate_hf_regex("a\\\\s"), "a\\\\s");  // an escaped backslash stays
}

}  // namespace
}  // namespace hayate::test
