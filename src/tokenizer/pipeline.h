// The text stages of a tokenizer.json around the BPE model: normalizer,
// pre-tokenizer and decoder, each built from its JSON object. Types this file
// does not implement are rejected at load with an Error naming them.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace hayate::tok {

// How deeply Sequence normalizers, pre-tokenizers, decoders and
// post-processors may nest (HF files nest one level; the bound keeps a hostile
// file from overflowing the stack).
inline constexpr int kMaxPipelineDepth = 32;

// Normalizer: Sequence of Prepend / Replace (what Llama 2, Mistral and
// TinyLlama use) / NFC (Qwen's), or none.
class Normalizer {
 public:
  explicit Normalizer(const nlohmann::json& j);  // j may be null
  bool empty() const { return steps_.empty(); }
  void apply(std::string& s) const;

 private:
  struct Step {
    enum Kind { kPrepend, kReplace, kNfc } kind;
    std::string text;              // Prepend: prefix; Replace: literal pattern
    std::unique_ptr<Regex> regex;  // Replace with a Regex pattern
    std::string content;           // Replace: replacement
  };
  void add(const nlohmann::json& j, int depth = 0);
  std::vector<Step> steps_;
};

// Pre-tokenizer: Sequence of Split (regex), ByteLevel, Metaspace; or none.
// A ByteLevel step must come last: it marks the words as raw bytes for the
// BPE model (which then maps bytes to its byte-level alphabet itself).
class PreTokenizer {
 public:
  explicit PreTokenizer(const nlohmann::json& j);
  bool byte_level() const { return byte_level_; }
  // Splits one section of text (between added tokens) into words.
  // first_section: the section starts at offset 0 of the input (Metaspace
  // prepend_scheme "first").
  void apply(std::string_view section, bool first_section, std::vector<std::string>& words) const;

 private:
  struct Step {
    enum Kind { kSplit, kByteLevel, kMetaspace } kind;
    std::unique_ptr<Regex> regex;
    enum Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
    Behavior behavior = kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement;        // Metaspace
    enum Prepend { kAlways, kFirst, kNever } prepend = kAlways;
    bool split = true;  // Metaspace
  };
  void add(const nlohmann::json& j, int depth = 0);
  void split(const Step& st, const std::vector<std::string>& in,
             std::vector<std::string>& out) const;
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

// Decoder chain over token strings, as HF's decode_chain.
class Decoder {
 public:
  explicit Decoder(const nlohmann::json& j);
  bool byte_level() const { return byte_level_; }
  // tokens: one string per id (added tokens verbatim, flagged in is_added).
  // raw=true keeps ill-formed bytes as they are (for the streaming decoder);
  // raw=false replaces them as HF does (ByteFallback: one U+FFFD per byte).
  // Returns the concatenated bytes; the caller makes them valid UTF-8.
  std::string decode(std::vector<std::string> tokens, const std::vector<bool>& is_added,
                     bool raw) const;

 private:
  struct Step {
    enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string a, b;  // Replace: pattern, content; Strip: content; Metaspace: replacement
    int start = 0, stop = 0;
    bool prepend = true;  // Metaspace: strip the first token's leading space
  };
  void add(const nlohmann::json& j, int depth = 0);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

// GPT-2 byte-level alphabet: byte -> code point, and the inverse.
char32_t byte_to_char(unsigned char b);
int char_to_byte(char32_t c);  // -1 when c is not in the alphabet

}  // namespace hayate::tok
