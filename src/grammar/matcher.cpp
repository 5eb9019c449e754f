#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace hayate::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), parser_(*grammar_, Parser::Mode::kFull), cache_capacity_(0) {
  states_.emplace_back();
  parser_.start(pool_, states_.back());
  terminated_.push_back(0);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenTables> tables, size_t mask_cache)
    : GrammarMatcher(tables->grammar_ptr()) {
  tables_ = std::move(tables);
  cache_capacity_ = mask_cache;
}

const TokenVocab& GrammarMatcher::vocab() const {
  HAYATE_CHECK(tables_, "grammar: this matcher has no vocabulary");
  return tables_->vocab();
}

bool GrammarMatcher::push_bytes(std::string_view bytes) {
  if (terminated()) return false;
  const ParseState* cur = &states_.back();
  int k = 0;
  for (char c : bytes) {
    parser_.advance(pool_, *cur, static_cast<uint8_t>(c), scratch_[k]);
    if (scratch_[k].tops.empty() && !scratch_[k].accepting) return false;
    cur = &scratch_[k];
    k ^= 1;
  }
  states_.push_back(*cur);
  terminated_.push_back(0);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) { return push_bytes(bytes); }

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocab& v = vocab();
  HAYATE_CHECK(id >= 0 && id < v.size(), "grammar: token id ", id, " is outside [0, ", v.size(), ")");
  if (v.is_eos(id)) {
    if (!can_end()) return false;
    states_.push_back(ParseState{});
    terminated_.push_back(1);
    return true;
  }
  if (!v.usable(id)) return false;
  return push_bytes(v.bytes(id));
}

void GrammarMatcher::rollback(size_t n) {
  HAYATE_CHECK(n <= steps(), "grammar: cannot roll back ", n, " steps, only ", steps(), " taken");
  states_.resize(states_.size() - n);
  terminated_.resize(terminated_.size() - n);
}

std::string GrammarMatcher::state_key(const ParseState& s) const {
  std::vector<int32_t> t = s.tops;
  std::sort(t.begin(), t.end());
  std::string key(t.size() * sizeof(int32_t) + 1, '\0');
  key[0] = s.accepting ? 1 : 0;
  if (!t.empty()) std::memcpy(key.data() + 1, t.data(), t.size() * sizeof(int32_t));
  return key;
}

void GrammarMatcher::fill_mask(std::vector<uint32_t>& mask) {
  const TokenVocab& v = vocab();
  mask.assign(v.mask_words(), 0);
  if (terminated()) return;
  const ParseState& s = states_.back();
  std::string key;
  if (cache_capacity_ > 0) {
    key = state_key(s);
    if (auto it = cache_.find(key); it != cache_.end()) {
      mask = it->second;
      return;
    }
  }
  tables_->add_allowed(pool_, parser_, walk_, s, mask);
  if (cache_capacity_ > 0) {
    if (cache_.size() >= cache_capacity_) {
      cache_.erase(cache_order_.front());
      cache_order_.pop_front();
    }
    cache_.emplace(key, mask);
    cache_order_.push_back(std::move(key));
  }
}

}  // namespace hayate::grammar
