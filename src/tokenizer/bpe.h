// The BPE model of a tokenizer.json: vocab, rank-ordered merges, byte-level
// or SentencePiece-style symbols (with byte_fallback), and a word cache.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hayate::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // model: tokenizer.json's "model" object. byte_level: words arrive as raw
  // bytes and each byte is one initial symbol in GPT-2's byte alphabet.
  BpeModel(const nlohmann::json& model, bool byte_level);

  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The vocab string of id ("" for a hole in the id range).
  const std::string& id_to_token(int32_t id) const { return id_to_token_[id]; }
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge(std::vector<int32_t>& ids) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;

  bool byte_level_;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;
  StringMap vocab_;        // vocab string -> id
  StringMap bytes_vocab_;  // byte-level: raw bytes of each token -> id
  std::vector<std::string> id_to_token_;
  std::array<int32_t, 256> byte_ids_{};      // byte-level initial symbols
  std::array<int32_t, 256> fallback_ids_{};  // "<0xNN>" tokens, -1 if absent
  // (left id << 32 | right id) -> (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;

  // Word cache: encode() is const and may run on several threads.
  static constexpr size_t kCacheCapacity = 1 << 17;
  static constexpr size_t kCacheMaxWord = 128;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace hayate::tok
