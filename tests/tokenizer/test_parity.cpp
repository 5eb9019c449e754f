// Parity with tokenizers.js (which matches HF tokenizers) on the committed
// corpus: node computes the expected ids at test time. Llama 3.1's and
// Qwen3's real tokenizer.json (Qwen3: also code, Chinese, Japanese and its
// added tokens in corpus_qwen3_extra.jsonl), with and without special tokens.
#include "tok_test_util.h"
#include "tokenizer/nfc.h"

namespace hayate::test {
namespace {

// nfc: the tokenizer normalizes to NFC (Qwen's), so decoding gives the text's NFC.
void check_parity(const Tokenizer& tok, const std::string& model,
                  const std::string& file = "corpus.jsonl", size_t min_lines = 300,
                  bool nfc = false) {
  std::string corpus = data_dir() + "/" + file;
  auto texts = json_lines(slurp(corpus));
  ASSERT_GE(texts.size(), min_lines);
  auto expected = json_lines(run_command("node " + oracle_dir() + "/tokenize_oracle.mjs " + model +
                                         " " + corpus));
  ASSERT_EQ(expected.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string text = texts[i].get<std::string>();
    auto bos = tok.encode(text, true);
    auto plain = tok.encode(text, false);
    bool ok = bos == expected[i]["bos"].get<std::vector<int32_t>>() &&
              plain == expected[i]["plain"].get<std::vector<int32_t>>();
    EXPECT_TRUE(ok) << model << " line " << i + 1 << ": " << nlohmann::json(text).dump()
                    << "\n ours:   " << nlohmann::json(plain).dump()
                    << "\n oracle: " << expected[i]["plain"].dump();
    mismatches += !ok;
    EXPECT_EQ(tok.decode(plain), expected[i]["decoded"].get<std::string>()) << "line " << i + 1;
    EXPECT_EQ(tok.decode(plain), nfc ? unicode::nfc(text) : text) << "round trip, line " << i + 1;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Parity, Llama3CorpusMatchesTokenizersJs) { check_parity(llama3(), "llama3_1"); }

TEST(Parity, Qwen3CorpusMatchesTokenizersJs) {
  const Tokenizer qwen = Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/qwen3");
  check_parity(qwen, "qwen3", "corpus.jsonl", 300, true);
  check_parity(qwen, "qwen3", "corpus_qwen3_extra.jsonl", 20, true);
}

}  // namespace
}  // namespace hayate::test
