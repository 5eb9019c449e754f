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
  // Reads dir/tokenizer.json and, if present, dir/tokenizer_config.json,
  // dir/chat_template.jinja and dir/additional_chat_templates/NAME.jinja
  // (these files replace the config's chat_template, as in transformers).
  // Supports BPE models: byte-level (Llama 3) and SentencePiece-style
  // (Metaspace / Prepend+Replace, byte_fallback: Llama 2, Mistral,
  // TinyLlama). A malformed file or an unsupported normalizer, pre-tokenizer,
  // model, post-processor or decoder type throws Error naming it.
  static Tokenizer load(const std::string& dir);
  // The same from the files' contents (config_json may be empty).
  static Tokenizer from_json(const std::string& tokenizer_json, const std::string& config_json);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // add_special_tokens as HF: applies the post-processor (BOS for Llama 3).
  // Added/special tokens written in the text are always recognised (HF's
  // default). Invalid UTF-8 in text is not rejected: each ill-formed
  // subsequence is replaced by U+FFFD first (as Python's errors="replace"
  // would before text could reach HF), so the result is the encoding of
  // that repaired string. Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The same, but stops once more than `limit` ids are out: a result longer
  // than `limit` is then a prefix of the encoding (with the post-processor's
  // prefix). A server rejecting prompts over the context length uses it so
  // that a huge prompt costs no more than the part that decides.
  std::vector<int32_t> encode_at_most(std::string_view text, bool add_special_tokens,
                                      size_t limit) const;
  // As the tokenizer.json decoder (HF tokenizers' decode; transformers'
  // clean_up_tokenization_spaces is not applied, so decode(encode(x)) == x).
  // Ill-formed byte sequences come out as U+FFFD. Throws Error for ids
  // outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The decoder's raw bytes, possibly not valid UTF-8 (for StreamDecoder).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  // Renders the model's chat template as HF's apply_chat_template
  // (bos_token, eos_token, add_generation_prompt). Throws Error when the
  // model has no template or it uses an unsupported construct.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt = true) const;
  // The same with messages as a JSON array (tool calls and other fields
  // pass through), extra template variables as a JSON object (tools,
  // date_string, ...) and HF's chat_template argument (see chat_template()),
  // tools counting as given when extra_vars_json has a non-null "tools".
  std::string apply_chat_template_json(const std::string& messages_json, bool add_generation_prompt,
                                       const std::string& extra_vars_json = "",
                                       std::string_view requested_template = {}) const;
  bool has_chat_template() const;
  // The template source HF's get_chat_template picks. A model's chat
  // template may be one template or several named ones (tokenizer_config's
  // list of {name, template}, or additional_chat_templates/). `requested`
  // (empty: none) names one of them or is itself a template; with none,
  // "tool_use" when the request has tools and the model has it, else
  // "default". Throws Error when there is no template to pick.
  std::string chat_template(std::string_view requested = {}, bool with_tools = false) const;
  // The names of the model's named templates (empty for a single template).
  std::vector<std::string> chat_template_names() const;
  // Replaces the model's template(s) with this one.
  void set_chat_template(std::string jinja_source);

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// transformers' continue_final_message: `rendered` (a chat rendered without
// a generation prompt) cut right after the final message's `content`, so the
// model continues that message: at the last occurrence of the stripped
// content, keeping its leading-stripped length when the template kept the
// spacing. Throws Error when the content does not appear.
std::string cut_after_final_message(const std::string& rendered, const std::string& content);

// Emits decoded text incrementally, only at whole UTF-8 characters: a
// character split across byte tokens is held until its last byte arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(int32_t id);  // text that became final with this id
  std::string flush();           // whatever remains (invalid bytes as U+FFFD)

 private:
  // ids_ is a sliding window: its first context_ ids were fully emitted and
  // stay only as left context (decoders treat the first token specially);
  // emitted_bytes_ counts the window's decoded bytes already returned.
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
  size_t context_ = 0;
};

}  // namespace hayate
