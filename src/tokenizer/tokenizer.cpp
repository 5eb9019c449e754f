// Tokenizer: tokenizer.json loading and the encode/decode pipeline, in HF's
// order: added tokens split out of the raw text, normalizer per remaining
// section, pre-tokenizer into words, BPE per word, post-processor.
#include "tokenizer/tokenizer.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/jinja.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/utf8.h"

namespace hayate {

using nlohmann::json;

namespace {

struct AddedToken {
  std::string content;  // as matched: normalized when `normalized`
  std::string raw;      // as written in tokenizer.json (what decode prints)
  int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// A run of text [b, e), or an added token (id >= 0) covering [b, e).
struct Segment {
  size_t b, e;
  int32_t id;
};

// Code point that ends at s[end) (end > 0), and its start.
char32_t cp_before(std::string_view s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  return utf8::next(s, i);
}

bool is_word_char(char32_t c) {
  // Approximates Rust's char::is_alphanumeric() || '_' for single_word.
  return c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : c >= 0xAA);
}

// tokenizer_config.json token fields: "text" or {"content": "text", ...}.
std::optional<std::string> config_token(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

json parse_json(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  HAYATE_CHECK(!j.is_discarded(), what, ": not valid JSON (malformed or truncated)");
  return j;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  HAYATE_CHECK(f.good(), p.string(), ": cannot open");
  std::string s;
  std::error_code ec;
  if (auto n = std::filesystem::file_size(p, ec); !ec) s.reserve(static_cast<size_t>(n));
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) s.append(buf, static_cast<size_t>(f.gcount()));
  HAYATE_CHECK(!f.bad(), p.string(), ": cannot read");
  return s;
}

}  // namespace

struct Tokenizer::Impl {
  tok::Normalizer normalizer;
  tok::PreTokenizer pre;
  tok::BpeModel model;
  tok::Decoder decoder;
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> added_by_id;
  // Candidates by first byte, longest first: leftmost-longest matching.
  std::array<std::vector<size_t>, 256> raw_first, norm_first;
  bool any_normalized = false;
  std::vector<int32_t> post_prefix, post_suffix;
  int32_t vocab_size = 0;
  std::optional<int32_t> bos;
  // The model's chat templates as transformers holds them: one unnamed
  // template (a string), or named ones (a dict: "default", "tool_use", ...).
  std::string chat_template;
  std::map<std::string, std::string> named_templates;
  json template_tokens = json::object();  // bos_token, eos_token, ... for templates

  // field(): a reference into the document (the model object is large:
  // copying it would double the load time).
  static const json& field(const json& j, const char* key) {
    static const json null_value;  // immutable
    auto it = j.find(key);
    return it == j.end() ? null_value : *it;
  }

  Impl(const json& tj, const json& cfg)
      : normalizer(field(tj, "normalizer")),
        pre(field(tj, "pre_tokenizer")),
        model(field(tj, "model"), pre.byte_level()),
        decoder(field(tj, "decoder")) {
    load_added(tj);
    vocab_size = model.size();
    for (const auto& a : added) vocab_size = std::max(vocab_size, a.id + 1);
    load_post(field(tj, "post_processor"), cfg);
    load_config(cfg);
  }

  void load_added(const json& tj) {
    if (!tj.contains("added_tokens") || tj["added_tokens"].is_null()) return;
    HAYATE_CHECK(tj["added_tokens"].is_array(), "tokenizer.json: added_tokens must be an array");
    for (const json& a : tj["added_tokens"]) {
      HAYATE_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() &&
                       a.contains("content") && a["content"].is_string(),
                   "tokenizer.json: an added token needs an integer id and a string content");
      int64_t id = a["id"].get<int64_t>();
      HAYATE_CHECK(id >= 0 && id < (1 << 24), "tokenizer.json: added token id ", id,
                   " out of range");
      AddedToken t;
      t.raw = t.content = a["content"].get<std::string>();
      HAYATE_CHECK(!t.content.empty() && utf8::is_valid(t.content),
                   "tokenizer.json: added token ", id, " has empty or invalid content");
      t.id = static_cast<int32_t>(id);
      auto flag = [&](const char* k, bool def) {
        return a.contains(k) && a[k].is_boolean() ? a[k].get<bool>() : def;
      };
      t.special = flag("special", false);
      t.lstrip = flag("lstrip", false);
      t.rstrip = flag("rstrip", false);
      t.single_word = flag("single_word", false);
      t.normalized = flag("normalized", !t.special);
      if (t.normalized) {
        normalizer.apply(t.content);
        any_normalized = any_normalized || !t.content.empty();
      }
      if (t.content.empty()) continue;
      added_by_id[t.id] = added.size();
      added.push_back(std::move(t));
    }
    for (size_t i = 0; i < added.size(); ++i) {
      auto& index = added[i].normalized ? norm_first : raw_first;
      index[static_cast<unsigned char>(added[i].content[0])].push_back(i);
    }
    for (auto* index : {&raw_first, &norm_first})
      for (auto& v : *index)
        std::stable_sort(v.begin(), v.end(), [&](size_t x, size_t y) {
          return added[x].content.size() > added[y].content.size();
        });
  }

  int32_t special_id(const json& st, const std::string& name) {
    if (st.is_object() && st.contains(name) && st[name].is_object() && st[name].contains("ids") &&
        st[name]["ids"].is_array() && st[name]["ids"].size() == 1 &&
        st[name]["ids"][0].is_number_integer()) {
      const int64_t id = st[name]["ids"][0].get<int64_t>();
      HAYATE_CHECK(id >= 0 && id < vocab_size, "tokenizer.json: post_processor special token '",
                   name, "' has id ", id, ", outside the vocabulary [0, ", vocab_size, ")");
      return int32_t(id);
    }
    for (const auto& a : added)
      if (a.raw == name) return a.id;
    if (auto id = model.token_to_id(name)) return *id;
    fail(cat("tokenizer.json: post_processor special token '", name, "' is unknown"));
  }

  void load_template(const json& p) {
    HAYATE_CHECK(p.contains("single") && p["single"].is_array(),
                 "tokenizer.json: TemplateProcessing needs \"single\"");
    bool seen_a = false;
    for (const json& piece : p["single"]) {
      if (piece.contains("Sequence")) {
        seen_a = true;
      } else if (piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
                 piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
        int32_t id = special_id(p.value("special_tokens", json()),
                                piece["SpecialToken"]["id"].get<std::string>());
        (seen_a ? post_suffix : post_prefix).push_back(id);
      } else {
        fail("tokenizer.json: TemplateProcessing piece must be Sequence or SpecialToken");
      }
    }
  }

  void load_post(const json& p, const json& cfg, int depth = 0) {
    HAYATE_CHECK(depth <= tok::kMaxPipelineDepth,
                 "tokenizer.json: post_processor Sequences nest deeper than ",
                 tok::kMaxPipelineDepth, " levels");
    if (!p.is_null()) {
      HAYATE_CHECK(p.is_object() && p.contains("type") && p["type"].is_string(),
                   "tokenizer.json: post_processor without a \"type\"");
      std::string type = p["type"].get<std::string>();
      if (type == "Sequence") {
        HAYATE_CHECK(p.contains("processors") && p["processors"].is_array(),
                     "tokenizer.json: post_processor Sequence needs \"processors\"");
        for (const json& q : p["processors"]) load_post(q, json(), depth + 1);
      } else if (type == "TemplateProcessing") {
        load_template(p);
      } else if (type != "ByteLevel") {  // ByteLevel only trims offsets
        fail(cat("tokenizer.json: unsupported post_processor type '", type, "'"));
      }
    }
    // transformers' LlamaTokenizerFast rebuilds the template from
    // add_bos_token / add_eos_token in tokenizer_config.json.
    std::string cls = cfg.is_object() ? cfg.value("tokenizer_class", std::string()) : "";
    if ((cls == "LlamaTokenizer" || cls == "LlamaTokenizerFast") &&
        (cfg.contains("add_bos_token") || cfg.contains("add_eos_token"))) {
      post_prefix.clear();
      post_suffix.clear();
      auto add = [&](const char* flag, const char* name, std::vector<int32_t>& where, bool def) {
        bool on = cfg.contains(flag) && cfg[flag].is_boolean() ? cfg[flag].get<bool>() : def;
        auto tokname = config_token(cfg, name);
        if (on && tokname) where.push_back(special_id(json(), *tokname));
      };
      add("add_bos_token", "bos_token", post_prefix, true);
      add("add_eos_token", "eos_token", post_suffix, false);
    }
  }

  void load_config(const json& cfg) {
    for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                          "cls_token", "mask_token"})
      if (auto v = config_token(cfg, k)) template_tokens[k] = *v;
    if (auto b = config_token(cfg, "bos_token")) {
      for (const auto& a : added)
        if (a.raw == *b) bos = a.id;
      if (!bos) bos = model.token_to_id(*b);
    }
    if (!bos && post_prefix.size() == 1) bos = post_prefix[0];
    if (cfg.is_object() && cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {  // [{"name": "default", "template": ...}, ...]
        for (const json& e : ct) {
          HAYATE_CHECK(e.is_object() && e.contains("name") && e["name"].is_string() &&
                           e.contains("template") && e["template"].is_string(),
                       "tokenizer_config.json: each entry of a chat_template list needs a string "
                       "'name' and a string 'template'");
          named_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
        }
      } else {
        HAYATE_CHECK(ct.is_null(),
                     "tokenizer_config.json: chat_template must be a string or a list of "
                     "{\"name\", \"template\"} objects");
      }
    }
  }

  // Leftmost-longest matches of added tokens in s, honouring single_word
  // and extending over whitespace for lstrip/rstrip.
  void split_added(std::string_view s, const std::array<std::vector<size_t>, 256>& index,
                   std::vector<Segment>& out) const {
    out.clear();
    size_t last = 0;
    for (size_t i = 0; i < s.size();) {
      const auto& cands = index[static_cast<unsigned char>(s[i])];
      const AddedToken* hit = nullptr;
      for (size_t c : cands) {
        const AddedToken& t = added[c];
        if (s.compare(i, t.content.size(), t.content) != 0) continue;
        if (t.single_word) {
          size_t st;
          size_t e = i + t.content.size();
          bool left_ok = i == 0 || !is_word_char(cp_before(s, i, st));
          size_t j = e;
          bool right_ok = e == s.size() || !is_word_char(utf8::next(s, j));
          if (!left_ok || !right_ok) continue;
        }
        hit = &t;
        break;
      }
      if (!hit) {
        ++i;
        continue;
      }
      size_t b = i, e = i + hit->content.size();
      if (hit->lstrip) {
        size_t st;
        while (b > last && utf8::is_white_space(cp_before(s, b, st))) b = st;
      }
      if (hit->rstrip) {
        for (size_t j = e; j < s.size();) {
          size_t k = j;
          if (!utf8::is_white_space(utf8::next(s, k))) break;
          e = j = k;
        }
      }
      if (b > last) out.push_back({last, b, -1});
      out.push_back({b, e, hit->id});
      last = i = e;
    }
    if (last < s.size()) out.push_back({last, s.size(), -1});
  }

  void encode_text(std::string_view section, bool first, std::vector<int32_t>& out,
                   std::vector<std::string>& words, size_t limit) const {
    pre.apply(section, first, words);
    for (const std::string& w : words) {
      model.encode_word(w, out);
      if (out.size() > limit) return;
    }
  }

  std::vector<int32_t> encode(std::string_view input, bool add_special,
                              size_t limit = SIZE_MAX) const {
    std::string clean;
    if (!utf8::is_valid(input)) {
      clean = utf8::lossy(input);
      input = clean;
    }
    std::vector<int32_t> out;
    if (add_special) out = post_prefix;
    std::vector<Segment> segs, sub;
    std::vector<std::string> words;
    split_added(input, raw_first, segs);
    for (const Segment& sg : segs) {
      if (out.size() > limit) return out;
      if (sg.id >= 0) {
        out.push_back(sg.id);
        continue;
      }
      std::string_view text = input.substr(sg.b, sg.e - sg.b);
      if (normalizer.empty() && !any_normalized) {
        encode_text(text, sg.b == 0, out, words, limit);
        continue;
      }
      std::string norm(text);
      normalizer.apply(norm);
      split_added(norm, norm_first, sub);
      for (const Segment& t : sub) {
        if (t.id >= 0) out.push_back(t.id);
        else encode_text(std::string_view(norm).substr(t.b, t.e - t.b), sg.b == 0 && t.b == 0,
                         out, words, limit);
        if (out.size() > limit) return out;
      }
    }
    if (add_special) out.insert(out.end(), post_suffix.begin(), post_suffix.end());
    return out;
  }

  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special, bool raw) const {
    std::vector<std::string> toks;
    std::vector<bool> is_added;
    toks.reserve(ids.size());
    for (int32_t id : ids) {
      HAYATE_CHECK(id >= 0 && id < vocab_size, "decode: token id ", id, " is out of range [0, ",
                   vocab_size, ")");
      if (auto it = added_by_id.find(id); it != added_by_id.end()) {
        const AddedToken& a = added[it->second];
        if (skip_special && a.special) continue;
        toks.push_back(a.raw);
        is_added.push_back(true);
      } else if (id < model.size() && !model.id_to_token(id).empty()) {
        toks.push_back(model.id_to_token(id));
        is_added.push_back(false);
      }  // an id in a hole of the vocab decodes to nothing, as HF
    }
    return decoder.decode(std::move(toks), is_added, raw);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json, const std::string& config_json) {
  json tj = parse_json(tokenizer_json, "tokenizer.json");
  HAYATE_CHECK(tj.is_object(), "tokenizer.json: top level must be an object");
  HAYATE_CHECK(tj.contains("model"), "tokenizer.json: no \"model\"");
  json cfg = config_json.empty() ? json::object() : parse_json(config_json, "tokenizer_config.json");
  HAYATE_CHECK(cfg.is_object(), "tokenizer_config.json: top level must be an object");
  try {
    return Tokenizer(std::make_unique<Impl>(tj, cfg));
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    fail(cat("tokenizer.json: ", e.what()));
  }
}

Tokenizer Tokenizer::load(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  HAYATE_CHECK(fs::exists(d / "tokenizer.json"), dir, ": no tokenizer.json");
  std::string cfg;
  if (fs::exists(d / "tokenizer_config.json")) cfg = read_file(d / "tokenizer_config.json");
  try {
    Tokenizer t = from_json(read_file(d / "tokenizer.json"), cfg);
    // transformers' current layout: chat_template.jinja (the default) and
    // additional_chat_templates/NAME.jinja (the named ones); when either
    // exists, they replace tokenizer_config.json's chat_template.
    std::map<std::string, std::string> files;
    if (fs::is_regular_file(d / "chat_template.jinja"))
      files["default"] = read_file(d / "chat_template.jinja");
    if (fs::is_directory(d / "additional_chat_templates"))
      for (const auto& e : fs::directory_iterator(d / "additional_chat_templates"))
        if (e.is_regular_file() && e.path().extension() == ".jinja")
          files[e.path().stem().string()] = read_file(e.path());
    if (files.size() == 1 && files.contains("default")) {
      t.set_chat_template(std::move(files["default"]));
    } else if (!files.empty()) {
      t.impl_->chat_template.clear();
      t.impl_->named_templates = std::move(files);
    }
    return t;
  } catch (const Error& e) {
    fail(cat(dir, ": ", e.what()));
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::vector<int32_t> Tokenizer::encode_at_most(std::string_view text, bool add_special_tokens,
                                               size_t limit) const {
  return impl_->encode(text, add_special_tokens, limit);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return utf8::lossy(impl_->decode_bytes(ids, skip_special_tokens, false));
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode_bytes(ids, skip_special_tokens, true);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& a : impl_->added)
    if (a.raw == token) return a.id;
  return impl_->model.token_to_id(token);
}

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

bool Tokenizer::has_chat_template() const {
  return !impl_->chat_template.empty() || !impl_->named_templates.empty();
}

std::vector<std::string> Tokenizer::chat_template_names() const {
  std::vector<std::string> names;
  for (const auto& [name, source] : impl_->named_templates) names.push_back(name);
  return names;
}

std::string Tokenizer::chat_template(std::string_view requested, bool with_tools) const {
  const auto& named = impl_->named_templates;
  if (!named.empty()) {
    if (!requested.empty()) {
      auto it = named.find(std::string(requested));
      return it != named.end() ? it->second : std::string(requested);
    }
    if (with_tools && named.contains("tool_use")) return named.at("tool_use");
    if (named.contains("default")) return named.at("default");
    std::string names;
    for (const auto& [name, source] : named) names += (names.empty() ? "" : ", ") + name;
    fail(cat("this model has several chat templates and none is named 'default': name one (",
             names, ") with --chat-template or the request's chat_template"));
  }
  if (!requested.empty()) return std::string(requested);
  HAYATE_CHECK(!impl_->chat_template.empty(),
               "this model has no chat template (tokenizer_config.json's chat_template, "
               "chat_template.jinja, or --chat-template)");
  return impl_->chat_template;
}

void Tokenizer::set_chat_template(std::string jinja_source) {
  impl_->chat_template = std::move(jinja_source);
  impl_->named_templates.clear();
}

std::string Tokenizer::apply_chat_template_json(const std::string& messages_json,
                                                bool add_generation_prompt,
                                                const std::string& extra_json,
                                                std::string_view requested_template) const {
  // ordered_json: the messages' and tools' keys stay in their given order.
  using ojson = nlohmann::ordered_json;
  auto parse = [](const std::string& text, const char* what) {
    ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    HAYATE_CHECK(!j.is_discarded(), what, ": not valid JSON (malformed or truncated)");
    return j;
  };
  ojson messages = parse(messages_json, "chat messages");
  HAYATE_CHECK(messages.is_array(), "chat messages must be a JSON array");
  ojson ctx = ojson::parse(impl_->template_tokens.dump());
  if (!extra_json.empty()) {
    ojson extra = parse(extra_json, "chat template variables");
    HAYATE_CHECK(extra.is_object(), "chat template variables must be a JSON object");
    for (auto& [k, v] : extra.items()) ctx[k] = v;
  }
  // transformers passes tools both to the template and to get_chat_template
  // (tool_use is chosen when tools is not None, an empty list included).
  const bool with_tools = ctx.contains("tools") && !ctx["tools"].is_null();
  const std::string source = chat_template(requested_template, with_tools);
  ctx["messages"] = std::move(messages);
  ctx["add_generation_prompt"] = add_generation_prompt;
  return jinja::render(source, ctx);
}

std::string Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt) const {
  json m = json::array();
  for (const auto& msg : messages) m.push_back({{"role", msg.role}, {"content", msg.content}});
  return apply_chat_template_json(m.dump(-1, ' ', false, json::error_handler_t::replace),
                                  add_generation_prompt, "");
}

std::string cut_after_final_message(const std::string& rendered, const std::string& content) {
  // Python's str.strip() / lstrip(): ASCII whitespace suffices for templates' own
  // spacing (the content's other whitespace is kept both ways).
  const char* ws = " \t\n\r\f\v";
  const size_t b = content.find_first_not_of(ws);
  const std::string lstripped = b == std::string::npos ? std::string() : content.substr(b);
  const size_t e = lstripped.find_last_not_of(ws);
  const std::string stripped = e == std::string::npos ? std::string() : lstripped.substr(0, e + 1);
  const size_t at = rendered.rfind(stripped);
  HAYATE_CHECK(at != std::string::npos,
               "continue_final_message is set but the final message does not appear in the "
               "chat after applying the chat template");
  if (rendered.compare(at, lstripped.size(), content) == 0)  // the template kept its spacing
    return rendered.substr(0, at + lstripped.size());
  return rendered.substr(0, at + stripped.size());  // trailing spacing was trimmed
}

}  // namespace hayate
