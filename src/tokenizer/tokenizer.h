// Hugging Face tokenizer.json, with exact id parity, plus the chat template
// from tokenizer_config.json and a streaming detokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hayate {

struct ChatMessage {
  std::string role;     // system, user, assistant, ...
  std::string content;
};

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, if present, dir/tokenizer_config.json.
  static Tokenizer load(const std::string& dir);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // add_special_tokens as HF: applies the post-processor (BOS for Llama 3).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Throws Error for ids out of range.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  // Renders tokenizer_config.json's chat_template as HF's apply_chat_template
  // (bos_token, eos_token, add_generation_prompt). Throws Error when the
  // model has no template or it uses an unsupported construct.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt = true) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Emits decoded text incrementally, only at whole UTF-8 characters: a
// character split across byte tokens is held until its last byte arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(int32_t id);  // text that became final with this id
  std::string flush();           // whatever remains (invalid bytes as U+FFFD)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

}  // namespace hayate
