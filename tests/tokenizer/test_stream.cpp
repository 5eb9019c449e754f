// StreamDecoder: pieces concatenate to decode(ids), and no piece ever ends
// inside a UTF-8 character.
#include "tok_test_util.h"
#include "tokenizer/utf8.h"

namespace hayate::test {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                       int* held = nullptr) {
  StreamDecoder sd(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    EXPECT_TRUE(utf8::is_valid(piece)) << "partial character emitted";
    if (held && piece.empty()) ++*held;
    out += piece;
  }
  out += sd.flush();
  return out;
}

TEST(Stream, JapaneseSplitAcrossByteTokensIsHeld) {
  const Tokenizer& tok = llama3();
  // Half-width katakana: several characters are split over two byte tokens.
  std::string text = "ｶﾀｶﾅ ﾊﾝｶｸ と 日本語の文章";
  auto ids = tok.encode(text, false);
  // Some single token must decode to an incomplete UTF-8 sequence, or this
  // test would not exercise the hold.
  bool split = false;
  for (int32_t id : ids)
    split = split || !utf8::is_valid(tok.decode_bytes(std::vector<int32_t>{id}));
  ASSERT_TRUE(split);
  int held = 0;
  EXPECT_EQ(stream_all(tok, ids, false, &held), text);
  EXPECT_GT(held, 0);
}

TEST(Stream, CorpusStreamsToTheSameText) {
  auto texts = json_lines(slurp(data_dir() + "/corpus.jsonl"));
  for (const Tokenizer* tok : {&llama3(), &llama2()}) {
    for (size_t i = 0; i < texts.size(); i += 3) {
      auto ids = tok->encode(texts[i].get<std::string>(), true);
      EXPECT_EQ(stream_all(*tok, ids, false), tok->decode(ids, false)) << "line " << i + 1;
      EXPECT_EQ(stream_all(*tok, ids, true), tok->decode(ids, true)) << "line " << i + 1;
    }
  }
}

TEST(Stream, InvalidBytesBecomeReplacementAtFlush) {
  const Tokenizer& tok = llama3();
  auto ids = tok.encode("日", false);
  ASSERT_GE(ids.size(), 1u);
  // A lone lead byte of a 3-byte character: held, then U+FFFD at flush.
  auto lead = tok.token_to_id("\xC3\xA6");  // byte 0xE6 in the byte-level alphabet
  ASSERT_TRUE(lead.has_value());
  StreamDecoder sd(tok);
  EXPECT_EQ(sd.push(*lead), "");
  EXPECT_EQ(sd.flush(), tok.decode(std::vector<int32_t>{*lead}));
  // Past the tokenizer's vocabulary: a model's padding rows, no text (as HF).
  EXPECT_EQ(sd.push(tok.vocab_size()), "");
  EXPECT_EQ(sd.push(tok.vocab_size() + 100), "");
  EXPECT_THROW(sd.push(-1), Error);
}

}  // namespace
}  // namespace hayate::test
