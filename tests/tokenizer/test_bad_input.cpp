// Bad input: invalid UTF-8, ids out of range, malformed or unsupported
// tokenizer.json files. Each gives a clear Error (or, for text, the
// documented U+FFFD repair), never a crash.
#include <functional>

#include "tok_test_util.h"
#include "tokenizer/utf8.h"

namespace hayate::test {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BadInput, InvalidUtf8IsReplacedWithFffd) {
  const Tokenizer& tok = llama3();
  for (std::string bad : {std::string("abc\xff"), std::string("\xe6\x97"), std::string("a\xc0\xaf b"),
                          std::string("\xed\xa0\x80 surrogate"),
                          std::string("\xf4\x90\x80\x80 too big")}) {
    std::string repaired = utf8::lossy(bad);
    EXPECT_TRUE(utf8::is_valid(repaired));
    EXPECT_NE(repaired.find("\xEF\xBF\xBD"), std::string::npos) << "no U+FFFD in repair of "
                                                                << nlohmann::json(repaired).dump();
    EXPECT_EQ(tok.encode(bad, true), tok.encode(repaired, true));
    EXPECT_EQ(tok.decode(tok.encode(bad, false)), repaired);
  }
}

TEST(BadInput, NulIsOrdinaryText) {
  std::string s("x\0y", 3);
  EXPECT_EQ(llama3().decode(llama3().encode(s, false)), s);
}

TEST(BadInput, LongRunsStayWithinRegexLimits) {
  // One pre-tokenizer word or whitespace run of 200 KB: no regex stack or
  // match limit error, no quadratic blow-up, lossless round trip.
  const Tokenizer& tok = llama3();
  std::string ja;
  for (int i = 0; i < 20000; ++i) ja += "日本語";
  for (std::string s : {std::string(200000, ' '), std::string(200000, 'a'), std::string(200000, '7'),
                        std::string(100000, '\n') + "x", ja, std::string(200000, '!')}) {
    auto ids = tok.encode(s, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.decode(ids), s);
  }
}

TEST(BadInput, DecodeRejectsIdsOutOfRange) {
  const Tokenizer& tok = llama3();
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_NO_THROW(tok.decode(std::vector<int32_t>{128255}));
  EXPECT_NE(error_of([&] { tok.decode(std::vector<int32_t>{1, 128256}); }).find("out of range"),
            std::string::npos);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-5}), Error);
}

nlohmann::json small_tokenizer() {
  // A tiny byte-level BPE: enough structure for the loader's checks.
  nlohmann::json vocab = nlohmann::json::object();
  vocab["a"] = 0;
  vocab["b"] = 1;
  vocab["ab"] = 2;
  return {{"version", "1.0"},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens", nlohmann::json::array()},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
}

TEST(BadInput, SmallTokenizerLoads) {
  Tokenizer t = Tokenizer::from_json(small_tokenizer().dump(), "");
  EXPECT_EQ(t.encode("ab", false), std::vector<int32_t>{2});
}

TEST(BadInput, UnknownTypesAreNamed) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* name;
  } cases[] = {
      {"normalizer", {{"type", "NFKC"}}, "NFKC"},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "BertNormalizer"}}}}}, "BertNormalizer"},
      {"pre_tokenizer", {{"type", "Whitespace"}}, "Whitespace"},
      {"decoder", {{"type", "WordPiece"}}, "WordPiece"},
      {"post_processor", {{"type", "RobertaProcessing"}}, "RobertaProcessing"},
  };
  for (const auto& c : cases) {
    auto j = small_tokenizer();
    j[c.field] = c.value;
    std::string msg = error_of([&] { Tokenizer::from_json(j.dump(), ""); });
    EXPECT_NE(msg.find(c.name), std::string::npos) << c.field << ": '" << msg << "'";
  }
  auto j = small_tokenizer();
  j["model"]["type"] = "Unigram";
  EXPECT_NE(error_of([&] { Tokenizer::from_json(j.dump(), ""); }).find("Unigram"), std::string::npos);
}

TEST(BadInput, InconsistentModelsAreRejected) {
  auto j = small_tokenizer();
  j["model"]["merges"] = {"a c"};
  EXPECT_NE(error_of([&] { Tokenizer::from_json(j.dump(), ""); }).find("not in the vocab"),
            std::string::npos);
  j = small_tokenizer();
  j["model"]["merges"] = {"abc"};
  EXPECT_THROW(Tokenizer::from_json(j.dump(), ""), Error);
  j = small_tokenizer();
  j["model"]["vocab"]["x"] = -1;
  EXPECT_THROW(Tokenizer::from_json(j.dump(), ""), Error);
  j = small_tokenizer();
  j["model"]["vocab"] = "oops";
  EXPECT_THROW(Tokenizer::from_json(j.dump(), ""), Error);
  j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of([&] { Tokenizer::from_json(j.dump(), ""); }).find("(unclosed"), std::string::npos);
  EXPECT_THROW(Tokenizer::from_json("[]", ""), Error);
  EXPECT_THROW(Tokenizer::from_json(small_tokenizer().dump(), "not json"), Error);
}

TEST(BadInput, TruncatedTokenizerJsonIsAnError) {
  std::string real = slurp(assets_llama3() + "/tokenizer.json");
  ASSERT_GT(real.size(), 1000000u);
  for (size_t n : {size_t(0), size_t(1), size_t(100), real.size() / 2, real.size() - 2}) {
    std::string msg = error_of([&] { Tokenizer::from_json(real.substr(0, n), ""); });
    EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << "prefix of " << n << " bytes";
  }
}

TEST(BadInput, MissingDirectoryIsNamed) {
  EXPECT_NE(error_of([] { Tokenizer::load("/nonexistent/dir"); }).find("/nonexistent/dir"),
            std::string::npos);
}

}  // namespace
}  // namespace hayate::test
