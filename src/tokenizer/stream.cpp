// Streaming detokenizer. Decoding is prefix-stable in the byte domain for
// the decoders we support (ByteLevel, and Replace/ByteFallback/Fuse/Strip/
// Metaspace whose only position rule concerns the first token), so the text
// of a new id is decode(window)[emitted:] with the window starting at the last
// token already shown (left context for the first-token rules). Bytes are
// returned only up to the last complete UTF-8 character; a character split
// across byte tokens waits for its last byte.
#include "core/check.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace hayate {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  HAYATE_CHECK(id >= 0, "decode: token id ", id, " is negative");
  // Ids past the tokenizer's vocabulary are the model's padding rows
  // (Qwen: 151,936 embeddings for 151,669 tokens): text nothing, as HF's
  // decode skips ids it does not know.
  if (id >= tok_.vocab_size()) return "";
  ids_.push_back(id);
  std::string all = tok_.decode_bytes(ids_, skip_special_);
  if (all.size() <= emitted_bytes_) return "";
  std::string_view fresh = std::string_view(all).substr(emitted_bytes_);
  size_t complete = utf8::complete_prefix_len(fresh);
  std::string out = utf8::lossy(fresh.substr(0, complete));
  emitted_bytes_ += complete;
  if (complete == fresh.size()) {
    // Everything shown: keep the last token that decodes to something as
    // left context, so that the next one is not treated as the first.
    size_t keep = ids_.size();
    while (keep > 0 &&
           tok_.decode_bytes(std::span<const int32_t>(&ids_[keep - 1], 1), skip_special_).empty())
      --keep;
    if (keep == 0) {
      ids_.clear();
      emitted_bytes_ = 0;
      context_ = 0;
    } else {
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(keep - 1));
      emitted_bytes_ = tok_.decode_bytes(ids_, skip_special_).size();
      context_ = ids_.size();
    }
  }
  return out;
}

std::string StreamDecoder::flush() {
  std::string all = tok_.decode_bytes(ids_, skip_special_);
  std::string out = all.size() > emitted_bytes_ ? utf8::lossy(all.substr(emitted_bytes_)) : "";
  ids_.clear();
  emitted_bytes_ = 0;
  context_ = 0;
  return out;
}

}  // namespace hayate
