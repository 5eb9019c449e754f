#include "tokenizer/pipeline.h"

#include <array>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/nfc.h"
#include "tokenizer/utf8.h"

namespace hayate::tok {

using nlohmann::json;

namespace {

std::string type_of(const json& j, const char* what) {
  HAYATE_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
               "tokenizer.json: ", what, " without a \"type\"");
  return j["type"].get<std::string>();
}

std::string str_field(const json& j, const char* key, const char* what) {
  HAYATE_CHECK(j.contains(key) && j[key].is_string(), "tokenizer.json: ", what, " needs a string \"",
               key, "\"");
  return j[key].get<std::string>();
}

bool bool_field(const json& j, const char* key, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  HAYATE_CHECK(j[key].is_boolean(), "tokenizer.json: \"", key, "\" must be a boolean");
  return j[key].get<bool>();
}

// {"String": "..."} or {"Regex": "..."}; returns (text, is_regex).
std::pair<std::string, bool> pattern_field(const json& j, const char* what) {
  HAYATE_CHECK(j.contains("pattern") && j["pattern"].is_object(), "tokenizer.json: ", what,
               " needs a \"pattern\" object");
  const json& p = j["pattern"];
  if (p.contains("String") && p["String"].is_string()) return {p["String"].get<std::string>(), false};
  if (p.contains("Regex") && p["Regex"].is_string()) return {p["Regex"].get<std::string>(), true};
  fail(cat("tokenizer.json: ", what, " pattern must be {\"String\": ...} or {\"Regex\": ...}"));
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  if (pos == 0) return;
  out.append(s, pos);
  s = std::move(out);
}

struct ByteTables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 256 + 68> to_byte{};  // code point -> byte, -1 outside the alphabet
  ByteTables() {
    to_byte.fill(-1);
    // GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves,
    // the other 68 bytes to U+0100.. in byte order.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = keep ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_char[b]] = b;
    }
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;  // immutable constant table
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return byte_tables().to_char[b]; }

int char_to_byte(char32_t c) { return c < 256 + 68 ? byte_tables().to_byte[c] : -1; }

// ---------------------------------------------------------------- normalizer

Normalizer::Normalizer(const json& j) {
  if (!j.is_null()) add(j);
}

void Normalizer::add(const json& j, int depth) {
  HAYATE_CHECK(depth <= kMaxPipelineDepth, "tokenizer.json: normalizer Sequences nest deeper than ",
               kMaxPipelineDepth, " levels");
  std::string type = type_of(j, "normalizer");
  if (type == "Sequence") {
    HAYATE_CHECK(j.contains("normalizers") && j["normalizers"].is_array(),
                 "tokenizer.json: normalizer Sequence needs \"normalizers\"");
    for (const json& n : j["normalizers"]) add(n, depth + 1);
  } else if (type == "NFC") {  // Qwen2, Qwen2.5, Qwen3
    steps_.push_back({Step::kNfc, "", nullptr, ""});
  } else if (type == "Prepend") {
    steps_.push_back({Step::kPrepend, str_field(j, "prepend", "Prepend normalizer"), nullptr, ""});
  } else if (type == "Replace") {
    auto [pat, is_regex] = pattern_field(j, "Replace normalizer");
    Step st{Step::kReplace, pat, nullptr, str_field(j, "content", "Replace normalizer")};
    if (is_regex) st.regex = std::make_unique<Regex>(pat, false);
    steps_.push_back(std::move(st));
  } else {
    fail(cat("tokenizer.json: unsupported normalizer type '", type, "'"));
  }
}

void Normalizer::apply(std::string& s) const {
  for (const Step& st : steps_) {
    if (st.kind == Step::kNfc) {
      s = unicode::nfc(s);
    } else if (st.kind == Step::kPrepend) {
      if (!s.empty()) s.insert(0, st.text);
    } else if (!st.regex) {
      replace_all(s, st.text, st.content);
    } else {
      std::vector<std::pair<size_t, size_t>> m;
      st.regex->find_all(s, m);
      std::string out;
      size_t pos = 0;
      for (auto [b, e] : m) {
        out.append(s, pos, b - pos);
        out += st.content;
        pos = e;
      }
      out.append(s, pos);
      s = std::move(out);
    }
  }
}

// ------------------------------------------------------------- pre-tokenizer

PreTokenizer::PreTokenizer(const json& j) {
  if (!j.is_null()) add(j);
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].kind == Step::kByteLevel) {
      HAYATE_CHECK(i + 1 == steps_.size(),
                   "tokenizer.json: a ByteLevel pre-tokenizer must be the last one");
      byte_level_ = true;
    }
}

void PreTokenizer::add(const json& j, int depth) {
  HAYATE_CHECK(depth <= kMaxPipelineDepth, "tokenizer.json: pre_tokenizer Sequences nest deeper than ",
               kMaxPipelineDepth, " levels");
  std::string type = type_of(j, "pre_tokenizer");
  Step st{};
  if (type == "Sequence") {
    HAYATE_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(),
                 "tokenizer.json: pre_tokenizer Sequence needs \"pretokenizers\"");
    for (const json& p : j["pretokenizers"]) add(p, depth + 1);
    return;
  } else if (type == "Split") {
    st.kind = Step::kSplit;
    auto [pat, is_regex] = pattern_field(j, "Split pre-tokenizer");
    st.regex = std::make_unique<Regex>(pat, !is_regex);
    std::string b = str_field(j, "behavior", "Split pre-tokenizer");
    if (b == "Isolated") st.behavior = Step::kIsolated;
    else if (b == "Removed") st.behavior = Step::kRemoved;
    else if (b == "MergedWithPrevious") st.behavior = Step::kMergedWithPrevious;
    else if (b == "MergedWithNext") st.behavior = Step::kMergedWithNext;
    else if (b == "Contiguous") st.behavior = Step::kContiguous;
    else fail(cat("tokenizer.json: unsupported Split behavior '", b, "'"));
    st.invert = bool_field(j, "invert", false);
  } else if (type == "ByteLevel") {
    st.kind = Step::kByteLevel;
    st.add_prefix_space = bool_field(j, "add_prefix_space", true);
    if (bool_field(j, "use_regex", true)) {
      // GPT-2's pattern, which ByteLevel applies itself when use_regex is on.
      Step sp{};
      sp.kind = Step::kSplit;
      sp.regex = std::make_unique<Regex>(
          "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", false);
      sp.behavior = Step::kIsolated;
      Step bl{};
      bl.kind = Step::kByteLevel;
      bl.add_prefix_space = st.add_prefix_space;
      // Prefix space first (on the whole section), then the regex split.
      if (bl.add_prefix_space) {
        Step pre{};
        pre.kind = Step::kMetaspace;  // reused below as "prefix space only"
        pre.replacement = " ";
        pre.prepend = Step::kAlways;
        pre.split = false;
        steps_.push_back(std::move(pre));
      }
      steps_.push_back(std::move(sp));
      bl.add_prefix_space = false;
      steps_.push_back(std::move(bl));
      return;
    }
  } else if (type == "Metaspace") {
    st.kind = Step::kMetaspace;
    st.replacement = str_field(j, "replacement", "Metaspace pre-tokenizer");
    st.split = bool_field(j, "split", true);
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      scheme = j["prepend_scheme"].get<std::string>();
    else if (!bool_field(j, "add_prefix_space", true))
      scheme = "never";
    if (scheme == "always") st.prepend = Step::kAlways;
    else if (scheme == "first") st.prepend = Step::kFirst;
    else if (scheme == "never") st.prepend = Step::kNever;
    else fail(cat("tokenizer.json: unknown Metaspace prepend_scheme '", scheme, "'"));
  } else {
    fail(cat("tokenizer.json: unsupported pre_tokenizer type '", type, "'"));
  }
  steps_.push_back(std::move(st));
}

void PreTokenizer::split(const Step& st, const std::vector<std::string>& in,
                         std::vector<std::string>& out) const {
  std::vector<std::pair<size_t, size_t>> m;
  for (const std::string& w : in) {
    st.regex->find_all(w, m);
    // Pieces covering w: (begin, end, is_match), gaps included.
    std::vector<std::tuple<size_t, size_t, bool>> parts;
    size_t pos = 0;
    for (auto [b, e] : m) {
      if (b > pos) parts.emplace_back(pos, b, false);
      parts.emplace_back(b, e, true);
      pos = e;
    }
    if (pos < w.size()) parts.emplace_back(pos, w.size(), false);
    if (st.invert)
      for (auto& p : parts) std::get<2>(p) = !std::get<2>(p);
    size_t first_out = out.size();
    bool merge_next = false;
    bool prev_match = false;
    for (auto [b, e, is_match] : parts) {
      std::string_view piece(w.data() + b, e - b);
      switch (st.behavior) {
        case Step::kIsolated: out.emplace_back(piece); break;
        case Step::kRemoved:
          if (!is_match) out.emplace_back(piece);
          break;
        case Step::kMergedWithPrevious:
          if (is_match && out.size() > first_out) out.back() += piece;
          else out.emplace_back(piece);
          break;
        case Step::kMergedWithNext:
          if (merge_next) out.back() += piece;
          else out.emplace_back(piece);
          merge_next = is_match;
          break;
        case Step::kContiguous:
          if (is_match && prev_match) out.back() += piece;
          else out.emplace_back(piece);
          break;
      }
      prev_match = is_match;
    }
  }
}

void PreTokenizer::apply(std::string_view section, bool first_section,
                         std::vector<std::string>& words) const {
  words.clear();
  words.emplace_back(section);
  std::vector<std::string> next;
  for (const Step& st : steps_) {
    if (st.kind == Step::kSplit) {
      next.clear();
      split(st, words, next);
      words.swap(next);
    } else if (st.kind == Step::kMetaspace) {
      next.clear();
      for (std::string& w : words) {
        std::string s = w;
        if (st.replacement != " ") replace_all(s, " ", st.replacement);
        bool prepend = st.prepend == Step::kAlways || (st.prepend == Step::kFirst && first_section);
        if (prepend && s.rfind(st.replacement, 0) != 0) s.insert(0, st.replacement);
        if (!st.split) {
          next.push_back(std::move(s));
          continue;
        }
        // Split before each replacement character (MergedWithNext).
        size_t start = 0;
        for (size_t hit = s.find(st.replacement, 1); hit != std::string::npos;
             hit = s.find(st.replacement, hit + 1)) {
          next.push_back(s.substr(start, hit - start));
          start = hit;
        }
        next.push_back(s.substr(start));
      }
      words.swap(next);
    }
    // ByteLevel: the words stay raw bytes; the model maps them.
  }
  std::erase_if(words, [](const std::string& w) { return w.empty(); });
}

// ------------------------------------------------------------------ decoder

Decoder::Decoder(const json& j) {
  if (!j.is_null()) add(j);
}

void Decoder::add(const json& j, int depth) {
  HAYATE_CHECK(depth <= kMaxPipelineDepth, "tokenizer.json: decoder Sequences nest deeper than ",
               kMaxPipelineDepth, " levels");
  std::string type = type_of(j, "decoder");
  Step st{};
  if (type == "Sequence") {
    HAYATE_CHECK(j.contains("decoders") && j["decoders"].is_array(),
                 "tokenizer.json: decoder Sequence needs \"decoders\"");
    for (const json& d : j["decoders"]) add(d, depth + 1);
    return;
  } else if (type == "ByteLevel") {
    st.kind = Step::kByteLevel;
    byte_level_ = true;
  } else if (type == "Replace") {
    st.kind = Step::kReplace;
    auto [pat, is_regex] = pattern_field(j, "Replace decoder");
    HAYATE_CHECK(!is_regex, "tokenizer.json: Replace decoder with a Regex pattern is unsupported");
    st.a = pat;
    st.b = str_field(j, "content", "Replace decoder");
  } else if (type == "ByteFallback") {
    st.kind = Step::kByteFallback;
  } else if (type == "Fuse") {
    st.kind = Step::kFuse;
  } else if (type == "Strip") {
    st.kind = Step::kStrip;
    st.a = str_field(j, "content", "Strip decoder");
    HAYATE_CHECK(j.contains("start") && j["start"].is_number_unsigned() && j.contains("stop") &&
                     j["stop"].is_number_unsigned(),
                 "tokenizer.json: Strip decoder needs unsigned \"start\" and \"stop\"");
    st.start = j["start"].get<int>();
    st.stop = j["stop"].get<int>();
  } else if (type == "Metaspace") {
    st.kind = Step::kMetaspace;
    st.a = str_field(j, "replacement", "Metaspace decoder");
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      scheme = j["prepend_scheme"].get<std::string>();
    else if (!bool_field(j, "add_prefix_space", true))
      scheme = "never";
    st.prepend = scheme != "never";
  } else {
    fail(cat("tokenizer.json: unsupported decoder type '", type, "'"));
  }
  steps_.push_back(std::move(st));
}

namespace {
// "<0xNN>" -> NN, or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}
}  // namespace

std::string Decoder::decode(std::vector<std::string> toks, const std::vector<bool>& is_added,
                            bool raw) const {
  if (steps_.empty()) {  // no decoder: HF joins the tokens with spaces
    std::string all;
    for (size_t t = 0; t < toks.size(); ++t) all += (t ? " " : "") + toks[t];
    return all;
  }
  std::vector<bool> added = is_added;
  for (const Step& st : steps_) {
    std::vector<std::string> out;
    std::vector<bool> out_added;
    switch (st.kind) {
      case Step::kByteLevel: {
        // Runs of non-added tokens map back to bytes; added tokens verbatim
        // (as tokenizers.js does; HF gives the same bytes for every token
        // whose characters are all outside the alphabet or map to ASCII).
        std::string bytes;
        for (size_t t = 0; t < toks.size(); ++t) {
          const std::string& s = toks[t];
          if (added[t]) {
            bytes += s;
            continue;
          }
          std::string mapped;
          bool ok = true;
          for (size_t i = 0; i < s.size() && ok;) {
            size_t n = utf8::valid_seq_len(s, i);
            if (!n) { ok = false; break; }
            int b = char_to_byte(utf8::next(s, i));
            if (b < 0) ok = false;
            else mapped += static_cast<char>(b);
          }
          bytes += ok ? mapped : s;
        }
        out.push_back(std::move(bytes));
        out_added.push_back(false);
        break;
      }
      case Step::kReplace:
        for (size_t t = 0; t < toks.size(); ++t) {
          replace_all(toks[t], st.a, st.b);
          out.push_back(std::move(toks[t]));
          out_added.push_back(added[t]);
        }
        break;
      case Step::kByteFallback: {
        std::string run;
        size_t run_len = 0;
        auto flush = [&] {
          if (!run_len) return;
          if (raw || utf8::is_valid(run)) {
            out.push_back(run);
          } else {
            std::string r;
            for (size_t k = 0; k < run_len; ++k) utf8::append(r, utf8::kReplacement);
            out.push_back(r);
          }
          out_added.push_back(false);
          run.clear();
          run_len = 0;
        };
        for (size_t t = 0; t < toks.size(); ++t) {
          int b = byte_token(toks[t]);
          if (b >= 0) {
            run += static_cast<char>(b);
            ++run_len;
          } else {
            flush();
            out.push_back(std::move(toks[t]));
            out_added.push_back(added[t]);
          }
        }
        flush();
        break;
      }
      case Step::kFuse: {
        std::string all;
        for (auto& s : toks) all += s;
        out.push_back(std::move(all));
        out_added.push_back(false);
        break;
      }
      case Step::kStrip:
        for (size_t t = 0; t < toks.size(); ++t) {
          std::string s = std::move(toks[t]);
          size_t b = 0, e = s.size();
          for (int k = 0; k < st.start && s.compare(b, st.a.size(), st.a) == 0 && b < e; ++k)
            b += st.a.size();
          for (int k = 0; k < st.stop && e >= b + st.a.size() &&
                          s.compare(e - st.a.size(), st.a.size(), st.a) == 0;
               ++k)
            e -= st.a.size();
          out.push_back(s.substr(b, e - b));
          out_added.push_back(added[t]);
        }
        break;
      case Step::kMetaspace:
        for (size_t t = 0; t < toks.size(); ++t) {
          std::string s = std::move(toks[t]);
          replace_all(s, st.a, " ");
          if (t == 0 && st.prepend && !s.empty() && s[0] == ' ') s.erase(0, 1);
          out.push_back(std::move(s));
          out_added.push_back(added[t]);
        }
        break;
    }
    toks = std::move(out);
    added = std::move(out_added);
  }
  std::string all;
  for (auto& s : toks) all += s;
  return all;
}

}  // namespace hayate::tok
