#include "grammar/vocab.h"

#include <algorithm>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace hayate::grammar {

TokenVocab::TokenVocab(std::vector<std::string> bytes, const std::vector<bool>& special,
                       std::vector<int32_t> eos)
    : bytes_(std::move(bytes)), eos_(std::move(eos)) {
  HAYATE_CHECK(special.size() == bytes_.size(), "vocab: ", special.size(), " special flags for ",
               bytes_.size(), " tokens");
  HAYATE_CHECK(!eos_.empty(), "vocab: no EOS token id");
  for (int32_t e : eos_)
    HAYATE_CHECK(e >= 0 && e < size(), "vocab: EOS id ", e, " is outside [0, ", size(), ")");
  usable_.resize(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) {
    usable_[i] = !special[i] && !bytes_[i].empty() && !is_eos(static_cast<int32_t>(i));
    HAYATE_CHECK(bytes_[i].size() < 65536, "vocab: token ", i, " is over 65535 bytes");
    if (usable_[i]) sorted_.push_back(static_cast<int32_t>(i));
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  lcp_.resize(sorted_.size());
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& t = bytes_[static_cast<size_t>(sorted_[i])];
    max_len_ = std::max(max_len_, t.size());
    if (i == 0) continue;
    const std::string& p = bytes_[static_cast<size_t>(sorted_[i - 1])];
    size_t k = 0;
    while (k < t.size() && k < p.size() && t[k] == p[k]) ++k;
    lcp_[i] = static_cast<uint16_t>(k);
  }
  size_t i = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    first_[b] = static_cast<uint32_t>(i);
    while (i < sorted_.size() &&
           static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted_[i])][0]) == b)
      ++i;
  }
  first_[256] = static_cast<uint32_t>(sorted_.size());
}

bool TokenVocab::is_eos(int32_t id) const {
  return std::find(eos_.begin(), eos_.end(), id) != eos_.end();
}

TokenVocab TokenVocab::from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos) {
  // Decoders treat the first token specially (SentencePiece strips its
  // leading space), so each id is decoded after an anchor token and the
  // anchor's bytes are cut off.
  std::optional<int32_t> anchor = tok.token_to_id("a");
  HAYATE_CHECK(anchor.has_value(), "vocab: the tokenizer has no token \"a\" to decode after");
  const int32_t a = *anchor;
  const std::string prefix = tok.decode_bytes(std::span<const int32_t>(&a, 1));
  const int32_t n = tok.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    special[static_cast<size_t>(id)] = tok.is_special(id);
    if (special[static_cast<size_t>(id)]) continue;
    const int32_t pair[2] = {a, id};
    std::string s = tok.decode_bytes(pair);
    HAYATE_CHECK(s.compare(0, prefix.size(), prefix) == 0, "vocab: token ", id,
                 " changes the text decoded before it");
    bytes[static_cast<size_t>(id)] = s.substr(prefix.size());
  }
  return TokenVocab(std::move(bytes), special, std::move(eos));
}

}  // namespace hayate::grammar
