#include "grammar/token_tables.h"

#include <algorithm>
#include <climits>

#include "core/check.h"

namespace hayate::grammar {

namespace {

inline void set_bit(std::vector<uint32_t>& m, int32_t id) {
  m[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
}

// Walks tokens in byte order from one start state, reusing the states of
// the prefix shared with the previous token: st[d] is the state after d
// bytes of the current token, valid for d <= valid; dead (if set) is the
// depth whose state has no stacks left, so a later token sharing that
// prefix is decided without parsing.
struct TrieWalk {
  std::vector<ParseState> st;
  // popped_by[d]: within the first d bytes, some path returned into an
  // unknown caller and the next byte is one that caller could take.
  std::vector<char> popped_by;
  size_t valid = 0;
  size_t dead = SIZE_MAX;

  void reset(size_t max_len) {
    if (st.size() < max_len + 1) st.resize(max_len + 1), popped_by.resize(max_len + 1);
    valid = 0;
    dead = SIZE_MAX;
    popped_by[0] = 0;
  }
  static bool pops_into(const ParseState& s, uint8_t next) { return s.popped && has_byte(s.follow, next); }
  enum Verdict { kAccepted, kRejected, kUncertain };
  // Classifies token bytes t whose first lcp bytes equal the previous token's.
  Verdict next(const std::string& t, size_t lcp, Parser& parser, StackPool& pool) {
    valid = std::min(valid, lcp);
    if (dead > valid) dead = SIZE_MAX;
    while (valid < t.size() && dead == SIZE_MAX) {
      const auto b = static_cast<uint8_t>(t[valid]);
      parser.advance(pool, st[valid], b, st[valid + 1]);
      popped_by[valid + 1] = popped_by[valid] || pops_into(st[valid], b);
      ++valid;
      if (st[valid].tops.empty()) dead = valid;
    }
    const size_t reached = std::min(t.size(), dead);
    if (reached == t.size() && st[reached].live()) return kAccepted;
    const bool pop_here = reached < t.size() && pops_into(st[reached], static_cast<uint8_t>(t[reached]));
    return popped_by[reached] || pop_here ? kUncertain : kRejected;
  }
};

}  // namespace

TokenTables::TokenTables(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenVocab> vocab, Build build)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  HAYATE_CHECK(grammar_ && vocab_, "grammar: no grammar or vocabulary");
  const auto& el = grammar_->elements();
  table_of_.assign(el.size(), -1);
  for (uint32_t p = 0; p < el.size(); ++p) {
    if (el[p].op != Grammar::Op::kBytes) continue;
    table_of_[p] = static_cast<int32_t>(tables_.size());
    tables_.emplace_back();
  }
  built_ = std::make_unique<std::once_flag[]>(tables_.size());
  if (build == Build::kEager)
    for (uint32_t p = 0; p < el.size(); ++p)
      if (table_of_[p] >= 0) table(p);
}

const TokenTables::Table& TokenTables::table(uint32_t pos) const {
  const auto i = static_cast<size_t>(table_of_[pos]);
  std::call_once(built_[i], [&] { build(pos, tables_[i]); });
  return tables_[i];
}

void TokenTables::build(uint32_t pos, Table& table) const {
  const TokenVocab& v = *vocab_;
  const auto& sorted = v.sorted();
  const auto& lcp = v.lcp();
  Parser parser(*grammar_, Parser::Mode::kLocal);
  StackPool pool;
  TrieWalk walk;
  walk.reset(v.max_token_bytes());
  walk.st[0].clear();
  walk.st[0].tops.push_back(pool.intern(pos, -1));
  std::vector<int32_t> accepted;
  const ByteSet& first = grammar_->byte_sets()[grammar_->elements()[pos].arg];
  size_t since_uncertain_lcp = 0;  // min lcp since the last uncertain token
  for (uint32_t b = 0; b < 256; ++b) {
    if (!has_byte(first, static_cast<uint8_t>(b))) continue;
    since_uncertain_lcp = 0;
    for (uint32_t i = v.first()[b]; i < v.first()[b + 1]; ++i) {
      const size_t l = i == v.first()[b] ? 0 : lcp[i];
      since_uncertain_lcp = std::min(since_uncertain_lcp, l);
      const int32_t id = sorted[i];
      switch (walk.next(v.bytes(id), l, parser, pool)) {
        case TrieWalk::kAccepted:
          accepted.push_back(id);
          break;
        case TrieWalk::kUncertain:
          table.uncertain.push_back({static_cast<int32_t>(i), static_cast<uint16_t>(since_uncertain_lcp)});
          since_uncertain_lcp = SIZE_MAX;
          break;
        case TrieWalk::kRejected:
          break;
      }
    }
  }
  if (accepted.size() > v.mask_words()) {
    table.accepted_bits.assign(v.mask_words(), 0);
    for (int32_t id : accepted) set_bit(table.accepted_bits, id);
  } else {
    table.accepted = std::move(accepted);
  }
}

void TokenTables::add_allowed(StackPool& pool, Parser& parser, const ParseState& state,
                              std::vector<uint32_t>& mask) const {
  const TokenVocab& v = *vocab_;
  HAYATE_CHECK(mask.size() == v.mask_words(), "grammar: mask has ", mask.size(), " words, need ",
               v.mask_words());
  if (state.accepting)
    for (int32_t e : v.eos()) set_bit(mask, e);
  // Group the stacks by their top position: one table, one walk per group.
  std::vector<std::pair<uint32_t, int32_t>> tops;
  for (int32_t t : state.tops) tops.push_back({pool[t].pos, t});
  std::sort(tops.begin(), tops.end());
  const size_t mark = pool.size();
  TrieWalk walk;
  for (size_t g = 0; g < tops.size();) {
    const uint32_t pos = tops[g].first;
    const Table& table = this->table(pos);
    if (!table.accepted_bits.empty()) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= table.accepted_bits[w];
    } else {
      for (int32_t id : table.accepted) set_bit(mask, id);
    }
    walk.reset(v.max_token_bytes());
    walk.st[0].clear();
    for (; g < tops.size() && tops[g].first == pos; ++g) walk.st[0].tops.push_back(tops[g].second);
    for (const Uncertain& u : table.uncertain) {
      const int32_t id = v.sorted()[static_cast<size_t>(u.sorted_index)];
      if (walk.next(v.bytes(id), u.lcp, parser, pool) == TrieWalk::kAccepted) set_bit(mask, id);
    }
  }
  pool.truncate(mark);
  parser.forget_from(mark);
}

TokenTables::Stats TokenTables::stats() const {
  Stats s;
  s.positions = tables_.size();
  for (const Table& t : tables_) {
    s.uncertain += t.uncertain.size();
    if (!t.accepted_bits.empty()) {
      ++s.bitset_positions;
      for (uint32_t w : t.accepted_bits) s.accepted += static_cast<size_t>(__builtin_popcount(w));
    } else {
      s.accepted += t.accepted.size();
    }
  }
  return s;
}

}  // namespace hayate::grammar
