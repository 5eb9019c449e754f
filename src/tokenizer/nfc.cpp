#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace hayate::unicode {

namespace {

struct Decomp {
  char32_t cp, first, second;
};
struct Ccc {
  char32_t cp;
  uint8_t ccc;
};
struct Comp {
  char32_t first, second, composite;
};
#include "tokenizer/nfc_tables.inc"

// Hangul syllables (UAX #15, 3.12): algorithmic, not in the tables.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

int ccc_of(char32_t c) {
  if (c < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCcc), std::end(kCcc), c,
                             [](const Ccc& e, char32_t v) { return e.cp < v; });
  return it != std::end(kCcc) && it->cp == c ? it->ccc : 0;
}

// Appends the full canonical decomposition of c.
void decompose(char32_t c, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (c >= 0xC0) {
    auto it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), c,
                               [](const Decomp& e, char32_t v) { return e.cp < v; });
    if (it != std::end(kDecomp) && it->cp == c) {
      decompose(it->first, out);
      if (it->second) decompose(it->second, out);
      return;
    }
  }
  out.push_back(c);
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kComp), std::end(kComp), std::pair{a, b},
                             [](const Comp& e, std::pair<char32_t, char32_t> v) {
                               return e.first != v.first ? e.first < v.first : e.second < v.second;
                             });
  return it != std::end(kComp) && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string nfc(std::string_view s) {
  size_t i = 0;
  bool simple = true;
  while (i < s.size() && simple) simple = utf8::next(s, i) < 0x300;
  if (simple) return std::string(s);
  std::vector<char32_t> d;
  d.reserve(s.size());
  for (i = 0; i < s.size();) decompose(utf8::next(s, i), d);
  // Canonical ordering: each run of non-starters sorted stably by class.
  for (size_t a = 0; a < d.size();) {
    if (ccc_of(d[a]) == 0) {
      ++a;
      continue;
    }
    size_t b = a;
    while (b < d.size() && ccc_of(d[b]) != 0) ++b;
    std::stable_sort(d.begin() + ptrdiff_t(a), d.begin() + ptrdiff_t(b),
                     [](char32_t x, char32_t y) { return ccc_of(x) < ccc_of(y); });
    a = b;
  }
  // Canonical composition: each character joins the last starter unless a
  // character between them blocks it (a class at least its own); a starter
  // joins only the starter right before it (Hangul L+V, LV+T).
  std::vector<char32_t> out;
  out.reserve(d.size());
  size_t starter = SIZE_MAX;  // index in out of the last starter
  int last_ccc = -1;          // class of the last character appended after it
  for (char32_t c : d) {
    const int k = ccc_of(c);
    if (starter != SIZE_MAX && (last_ccc < k || last_ccc == 0)) {
      if (char32_t x = compose(out[starter], c)) {
        out[starter] = x;
        continue;
      }
    }
    if (k == 0) {
      starter = out.size();
      last_ccc = 0;
    } else {
      last_ccc = k;
    }
    out.push_back(c);
  }
  std::string r;
  r.reserve(s.size());
  for (char32_t c : out) utf8::append(r, c);
  return r;
}

}  // namespace hayate::unicode
