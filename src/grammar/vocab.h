// A tokenizer's vocabulary as the grammar sees it: the bytes each token id
// adds to the output, sorted so that tokens sharing a prefix are adjacent
// (the mask precompute walks them as a trie, reusing the parse of the
// shared prefix).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hayate {
class Tokenizer;
}

namespace hayate::grammar {

class TokenVocab {
 public:
  // bytes[id]: what the token emits; an id with special[id] set (control
  // tokens) or no bytes can never be chosen under a grammar, except the ids
  // in eos, which are allowed exactly where the grammar may end.
  TokenVocab(std::vector<std::string> bytes, const std::vector<bool>& special,
             std::vector<int32_t> eos);
  // From a loaded tokenizer: each id's bytes as the decoder emits them after
  // other text (byte-level BPE maps its alphabet back to bytes, byte-fallback
  // <0xNN> tokens are that byte, SentencePiece's U+2581 is a space); special
  // tokens are never allowed. eos must be non-empty (the model's EOS ids).
  static TokenVocab from_tokenizer(const Tokenizer& tok, std::vector<int32_t> eos);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool usable(int32_t id) const { return usable_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eos() const { return eos_; }
  bool is_eos(int32_t id) const;
  // Usable ids in byte order; lcp[i]: common prefix length of sorted[i]
  // with sorted[i - 1] (0 for i = 0); tokens starting with byte b are
  // sorted[first[b] .. first[b + 1]).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<uint16_t>& lcp() const { return lcp_; }
  const std::array<uint32_t, 257>& first() const { return first_; }
  size_t max_token_bytes() const { return max_len_; }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }

 private:
  std::vector<std::string> bytes_;
  std::vector<char> usable_;
  std::vector<int32_t> eos_;
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
  std::array<uint32_t, 257> first_{};
  size_t max_len_ = 0;
};

}  // namespace hayate::grammar
