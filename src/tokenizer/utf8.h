// UTF-8 helpers shared by the tokenizer pieces: code point iteration,
// validation with U+FFFD replacement of maximal subparts (as Python's
// errors="replace", Rust's from_utf8_lossy and the WHATWG decoder do), and the
// whitespace sets that the regex engines and Python's str.strip() use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hayate::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes
// there do not start a valid sequence (overlong, surrogate, > U+10FFFF,
// truncated or a stray continuation byte).
inline size_t valid_seq_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = s.size();
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return (i + 1 < n && (b(i + 1) & 0xC0) == 0x80) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (i + 2 >= n) return 0;
    unsigned char c1 = b(i + 1);
    unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return (c1 >= lo && c1 <= hi && (b(i + 2) & 0xC0) == 0x80) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (i + 3 >= n) return 0;
    unsigned char c1 = b(i + 1);
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return (c1 >= lo && c1 <= hi && (b(i + 2) & 0xC0) == 0x80 && (b(i + 3) & 0xC0) == 0x80) ? 4
                                                                                            : 0;
  }
  return 0;
}

// Bytes of the "maximal subpart" of an ill-formed sequence at s[i]: the
// longest prefix of a valid sequence (at least 1). One U+FFFD replaces it.
inline size_t invalid_subpart_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                         : (c >= 0xF0 && c <= 0xF4) ? 4 : 1;
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    unsigned char ck = b(i + k);
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1 && c == 0xE0) lo = 0xA0;
    if (k == 1 && c == 0xED) hi = 0x9F;
    if (k == 1 && c == 0xF0) lo = 0x90;
    if (k == 1 && c == 0xF4) hi = 0x8F;
    if (ck < lo || ck > hi) break;
  }
  return k;
}

inline bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = valid_seq_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Replaces every ill-formed subpart by U+FFFD; valid input comes back as is.
inline std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = valid_seq_len(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      append(out, kReplacement);
      i += invalid_subpart_len(s, i);
    }
  }
  return out;
}

// Decodes the code point at s[i] of a VALID string and advances i.
inline char32_t next(std::string_view s, size_t& i) {
  auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[k])); };
  char32_t c = b(i);
  if (c < 0x80) {
    i += 1;
    return c;
  }
  if (c < 0xE0) {
    char32_t cp = ((c & 0x1F) << 6) | (b(i + 1) & 0x3F);
    i += 2;
    return cp;
  }
  if (c < 0xF0) {
    char32_t cp = ((c & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
    i += 3;
    return cp;
  }
  char32_t cp = ((c & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) |
                (b(i + 3) & 0x3F);
  i += 4;
  return cp;
}

// Byte length of the code point whose lead byte is c (valid input).
inline size_t lead_len(unsigned char c) {
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

// Length of the longest prefix of s that ends on a character boundary, where
// only a trailing PROPER prefix of a valid sequence counts as incomplete (an
// ill-formed byte elsewhere is complete: it becomes U+FFFD right away).
inline size_t complete_prefix_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = valid_seq_len(s, i);
    if (n) {
      i += n;
      continue;
    }
    size_t k = invalid_subpart_len(s, i);
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                           : (c >= 0xF0 && c <= 0xF4) ? 4 : 1;
    if (i + k == s.size() && k < need) return i;  // truncated at the very end
    i += k;
  }
  return i;
}

// Unicode White_Space (what Oniguruma's \s matches, and so HF tokenizers'
// Split regexes and the lstrip/rstrip of added tokens).
inline bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's str.isspace(), which str.strip() and Jinja's trim use: White_Space
// plus the information separators U+001C..U+001F.
inline bool is_python_space(char32_t c) {
  return is_white_space(c) || (c >= 0x1C && c <= 0x1F);
}

}  // namespace hayate::utf8
