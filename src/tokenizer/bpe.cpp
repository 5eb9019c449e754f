#include "tokenizer/bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/utf8.h"

namespace hayate::tok {

using nlohmann::json;

namespace {
// Ids are bounded so that a hostile file cannot make us allocate gigabytes.
constexpr int64_t kMaxId = 1 << 24;

std::string fallback_name(int b) {
  const char* hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}
}  // namespace

BpeModel::BpeModel(const json& m, bool byte_level) : byte_level_(byte_level) {
  HAYATE_CHECK(m.is_object(), "tokenizer.json: \"model\" must be an object");
  std::string type = m.value("type", std::string("BPE"));
  HAYATE_CHECK(type == "BPE", "tokenizer.json: unsupported model type '", type, "' (only BPE)");
  HAYATE_CHECK(m.contains("vocab") && m["vocab"].is_object(), "tokenizer.json: model.vocab missing");
  HAYATE_CHECK(m.contains("merges") && m["merges"].is_array(),
               "tokenizer.json: model.merges missing");
  auto flag = [&](const char* k) { return m.contains(k) && m[k].is_boolean() && m[k].get<bool>(); };
  byte_fallback_ = flag("byte_fallback");
  ignore_merges_ = flag("ignore_merges");
  fuse_unk_ = flag("fuse_unk");
  if (m.contains("dropout") && !m["dropout"].is_null())
    HAYATE_CHECK(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0,
                 "tokenizer.json: BPE dropout is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null())
      HAYATE_CHECK(m[k].is_string() && m[k].get<std::string>().empty(), "tokenizer.json: BPE ", k,
                   " is not supported");

  int64_t max_id = -1;
  vocab_.reserve(m["vocab"].size());
  merges_.reserve(m["merges"].size());
  for (const auto& [tok, id] : m["vocab"].items()) {
    HAYATE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxId,
                 "tokenizer.json: vocab id of '", tok, "' must be an integer in [0, ", kMaxId, ")");
    vocab_.insert_or_assign(tok, id.get<int32_t>());
    max_id = std::max(max_id, id.get<int64_t>());
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [tok, id] : vocab_) id_to_token_[id] = tok;

  byte_ids_.fill(-1);
  fallback_ids_.fill(-1);
  if (byte_level_) {
    // Raw-byte view of the vocab: the word's bytes index it directly.
    bytes_vocab_.reserve(vocab_.size());
    std::string raw;
    for (const auto& [tok, id] : vocab_) {
      raw.clear();
      bool ok = utf8::is_valid(tok);
      for (size_t i = 0; ok && i < tok.size();) {
        int b = char_to_byte(utf8::next(tok, i));
        if (b < 0) ok = false;
        else raw += static_cast<char>(b);
      }
      if (ok) bytes_vocab_.insert_or_assign(raw, id);
    }
    for (int b = 0; b < 256; ++b) {
      auto it = bytes_vocab_.find(std::string(1, static_cast<char>(b)));
      if (it != bytes_vocab_.end()) byte_ids_[b] = it->second;
    }
  }
  if (byte_fallback_)
    for (int b = 0; b < 256; ++b)
      if (auto it = vocab_.find(fallback_name(b)); it != vocab_.end()) fallback_ids_[b] = it->second;
  if (m.contains("unk_token") && !m["unk_token"].is_null()) {
    HAYATE_CHECK(m["unk_token"].is_string(), "tokenizer.json: model.unk_token must be a string");
    auto it = vocab_.find(m["unk_token"].get<std::string>());
    HAYATE_CHECK(it != vocab_.end(), "tokenizer.json: unk_token '",
                 m["unk_token"].get<std::string>(), "' is not in the vocab");
    unk_id_ = it->second;
  }

  int32_t rank = 0;
  std::string ab;  // a + b, reused: no allocation per merge
  for (const json& mg : m["merges"]) {
    std::string_view a, b;
    if (mg.is_string()) {
      std::string_view s = mg.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      HAYATE_CHECK(sp != std::string_view::npos && s.find(' ', sp + 1) == std::string_view::npos,
                   "tokenizer.json: merge '", s, "' is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      HAYATE_CHECK(mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string(),
                   "tokenizer.json: a merge must be \"a b\" or [\"a\", \"b\"]");
      a = mg[0].get_ref<const std::string&>();
      b = mg[1].get_ref<const std::string&>();
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    ab.assign(a).append(b);
    auto iab = vocab_.find(std::string_view(ab));
    HAYATE_CHECK(ia != vocab_.end() && ib != vocab_.end(), "tokenizer.json: merge '", a, " ", b,
                 "' uses a token that is not in the vocab");
    HAYATE_CHECK(iab != vocab_.end(), "tokenizer.json: merge '", a, " ", b,
                 "' makes a token that is not in the vocab");
    uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
    merges_[key] = {rank++, iab->second};  // a repeated pair keeps its last rank, as HF
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view w, std::vector<int32_t>& ids) const {
  bool last_unk = false;
  auto unknown = [&] {
    if (unk_id_ < 0) return;  // no unk token: the character is dropped, as HF
    if (!(fuse_unk_ && last_unk)) ids.push_back(unk_id_);
    last_unk = true;
  };
  if (byte_level_) {
    for (unsigned char c : w) {
      if (byte_ids_[c] >= 0) {
        ids.push_back(byte_ids_[c]);
        last_unk = false;
      } else {
        unknown();
      }
    }
    return;
  }
  for (size_t i = 0; i < w.size();) {
    size_t n = utf8::lead_len(static_cast<unsigned char>(w[i]));
    n = std::min(n, w.size() - i);
    std::string_view ch = w.substr(i, n);
    i += n;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      ids.push_back(it->second);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = std::all_of(ch.begin(), ch.end(), [&](char c) {
        return fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      });
      if (all) {
        for (char c : ch) ids.push_back(fallback_ids_[static_cast<unsigned char>(c)]);
        last_unk = false;
        continue;
      }
    }
    unknown();
  }
}

// Merges adjacent symbols lowest rank first (leftmost on ties), as HF's
// BPE does with its priority queue: O(n log n) in the word length.
void BpeModel::merge(std::vector<int32_t>& ids) const {
  const int n = static_cast<int>(ids.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
  auto rank_of = [&](int i) -> const std::pair<int32_t, int32_t>* {
    uint64_t key = (static_cast<uint64_t>(ids[i]) << 32) | static_cast<uint32_t>(ids[next[i]]);
    auto it = merges_.find(key);
    return it == merges_.end() ? nullptr : &it->second;
  };
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (auto* r = rank_of(i)) {
      heap.push_back({r->first, i});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    Cand c = heap.back();
    heap.pop_back();
    if (ids[c.pos] < 0 || next[c.pos] < 0) continue;  // merged away
    auto* r = rank_of(c.pos);
    if (!r || r->first != c.rank) continue;  // the pair changed since it was queued
    int right = next[c.pos];
    ids[c.pos] = r->second;
    ids[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::erase(ids, -1);
}

void BpeModel::encode_word(std::string_view w, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const StringMap& whole = byte_level_ ? bytes_vocab_ : vocab_;
    if (auto it = whole.find(w); it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = w.size() <= kCacheMaxWord;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(w); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(w.size());
  initial_symbols(w, ids);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(w), std::move(ids));
  }
}

}  // namespace hayate::tok
