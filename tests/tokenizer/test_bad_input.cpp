// Bad input: invalid UTF-8, ids out of range, malformed or unsupported
// tokenizer.json files. Each gives a clear Error (or, for text, the
// documented U+FFFD repair), never a crash.
#include <functional>

#include "tok_test_util.h"
#include "tokenizer/regex.h"
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

// Sequences nested 20,000 deep overflowed the stack while loading.
TEST(BadInput, DeeplyNestedSequencesAreRejected) {
  struct Case {
    const char* field;
    const char* list;
    nlohmann::json leaf;
  } cases[] = {
      {"normalizer", "normalizers", {{"type", "Prepend"}, {"prepend", "x"}}},
      {"pre_tokenizer", "pretokenizers", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", "decoders", {{"type", "ByteLevel"}}},
      {"post_processor", "processors", {{"type", "ByteLevel"}}},
  };
  for (const auto& c : cases) {
    // Built as text: nlohmann's own recursive dump would overflow first.
    std::string open = cat("{\"type\": \"Sequence\", \"", c.list, "\": [");
    std::string nested;
    for (int i = 0; i < 20000; ++i) nested += open;
    nested += c.leaf.dump();
    for (int i = 0; i < 20000; ++i) nested += "]}";
    auto j = small_tokenizer();
    j[c.field] = nullptr;
    std::string text = j.dump();
    const std::string key = cat("\"", c.field, "\":null");
    ASSERT_NE(text.find(key), std::string::npos);
    text.replace(text.find(key), key.size(), cat("\"", c.field, "\":", nested));
    std::string msg = error_of([&] { Tokenizer::from_json(text, ""); });
    EXPECT_NE(msg.find("nest deeper than"), std::string::npos) << c.field << ": '" << msg << "'";
    // One level of Sequence, as HF files have, still loads.
    j[c.field] = {{"type", "Sequence"}, {c.list, {c.leaf}}};
    EXPECT_NO_THROW(Tokenizer::from_json(j.dump(), "")) << c.field;
  }
}

// A special-token id above int32 wrapped to a negative id.
TEST(BadInput, PostProcessorIdsOutsideTheVocabularyAreRejected) {
  for (int64_t id : {int64_t(4294967296) + 1, int64_t(2147483648), int64_t(-1), int64_t(3)}) {
    auto j = small_tokenizer();
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {id}}, {"tokens", {"<s>"}}}}}}};
    std::string msg = error_of([&] { Tokenizer::from_json(j.dump(), ""); });
    EXPECT_NE(msg.find("outside the vocabulary"), std::string::npos) << id << ": '" << msg << "'";
  }
}

TEST(BadInput, TenMillionSpacesSplitWithinRegexLimits) {
  // Llama 3's Split pattern on a 10 M-character whitespace run: `\s*[\r\n]+`
  // backtracks over the whole run before `\s+(?!\S)` takes it, which PCRE2's
  // default match limit failed with error -47, shown to clients. (The
  // regex alone: BPE over a 10 M-byte word would take minutes under ASan.)
  auto tj = nlohmann::json::parse(slurp(assets_llama3() + "/tokenizer.json"));
  Regex re(tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>(), false);
  const std::string s = "a" + std::string(10'000'000, ' ') + "b";
  std::vector<std::pair<size_t, size_t>> out;
  re.find_all(s, out);
  EXPECT_EQ(out, (std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 10'000'000}, {10'000'000, 10'000'002}}));
}

TEST(BadInput, EncodeAtMostStopsAfterTheLimit) {
  const Tokenizer& tok = llama3();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += cat("word", i, " <|eot_id|> ");
  std::vector<int32_t> full = tok.encode(text, true);
  for (size_t limit : {size_t(0), size_t(10), size_t(1000)}) {
    std::vector<int32_t> part = tok.encode_at_most(text, true, limit);
    EXPECT_GT(part.size(), limit);
    EXPECT_LT(part.size(), limit + 8);
    EXPECT_EQ(part, std::vector<int32_t>(full.begin(), full.begin() + ptrdiff_t(part.size())));
  }
  EXPECT_EQ(tok.encode_at_most(text, true, full.size()), full);
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
