#include "grammar/token_tables.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/check.h"

namespace hayate::grammar {

namespace {

inline void set_bit(std::vector<uint32_t>& m, int32_t id) {
  m[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
}

}  // namespace

TrieWalk::Verdict TrieWalk::next(const std::string& t, size_t lcp, Parser& parser, StackPool& pool) {
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

TokenTables::TokenTables(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenVocab> vocab, Build build,
                         std::chrono::steady_clock::time_point deadline)
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
  if (build == Build::kEager) {
    size_t built = 0;
    for (uint32_t p = 0; p < el.size(); ++p) {
      if (table_of_[p] < 0) continue;
      HAYATE_CHECK(std::chrono::steady_clock::now() < deadline,
                   "grammar: over the compile time limit (token tables of ", built, " of ",
                   tables_.size(), " positions built)");
      table(p);
      ++built;
    }
  }
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
  // A list costs a scattered write per id, a bitset one OR per word of
  // the mask (sequential, vectorized): past ~1/8 of the words, OR wins.
  if (accepted.size() > v.mask_words() / 8) {
    table.accepted_bits.assign(v.mask_words(), 0);
    for (int32_t id : accepted) set_bit(table.accepted_bits, id);
  } else {
    table.accepted = std::move(accepted);
  }
}

void TokenTables::add_allowed(StackPool& pool, Parser& parser, TrieWalk& walk, const ParseState& state,
                              std::vector<uint32_t>& mask) const {
  const TokenVocab& v = *vocab_;
  HAYATE_CHECK(mask.size() == v.mask_words(), "grammar: mask has ", mask.size(), " words, need ",
               v.mask_words());
  if (state.accepting)
    for (int32_t e : v.eos()) set_bit(mask, e);
  // One table for the set of top positions (the union of theirs, made
  // once), then one walk of its uncertain tokens from all the stacks.
  std::vector<uint32_t> positions;
  for (int32_t t : state.tops) positions.push_back(pool[t].pos);
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  if (positions.empty()) return;
  const Table& table = positions.size() == 1 ? this->table(positions[0]) : group_table(positions);
  if (!table.accepted_bits.empty()) {
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= table.accepted_bits[w];
  } else {
    for (int32_t id : table.accepted) set_bit(mask, id);
  }
  if (table.uncertain.empty()) return;
  walk.reset(v.max_token_bytes());
  walk.st[0].clear();
  walk.st[0].tops = state.tops;
  for (const Uncertain& u : table.uncertain) {
    const int32_t id = v.sorted()[static_cast<size_t>(u.sorted_index)];
    if (walk.next(v.bytes(id), u.lcp, parser, pool) == TrieWalk::kAccepted) set_bit(mask, id);
  }
}

const TokenTables::Table& TokenTables::group_table(const std::vector<uint32_t>& positions) const {
  std::string key(positions.size() * sizeof(uint32_t), '\0');
  std::memcpy(key.data(), positions.data(), key.size());
  {
    std::lock_guard<std::mutex> lock(groups_mutex_);
    if (auto it = groups_.find(key); it != groups_.end()) return *it->second;
  }
  const TokenVocab& v = *vocab_;
  auto g = std::make_unique<Table>();
  g->accepted_bits.assign(v.mask_words(), 0);
  std::vector<int32_t> uncertain;  // sorted indices
  for (uint32_t p : positions) {
    const Table& t = table(p);
    if (!t.accepted_bits.empty()) {
      for (size_t w = 0; w < g->accepted_bits.size(); ++w) g->accepted_bits[w] |= t.accepted_bits[w];
    } else {
      for (int32_t id : t.accepted) set_bit(g->accepted_bits, id);
    }
    for (const Uncertain& u : t.uncertain) uncertain.push_back(u.sorted_index);
  }
  std::sort(uncertain.begin(), uncertain.end());
  uncertain.erase(std::unique(uncertain.begin(), uncertain.end()), uncertain.end());
  const std::string* prev = nullptr;
  for (int32_t i : uncertain) {
    const int32_t id = v.sorted()[static_cast<size_t>(i)];
    if ((g->accepted_bits[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1) continue;
    const std::string& cur = v.bytes(id);
    size_t l = 0;
    if (prev)
      while (l < cur.size() && l < prev->size() && cur[l] == (*prev)[l]) ++l;
    g->uncertain.push_back({i, static_cast<uint16_t>(l)});
    prev = &cur;
  }
  std::lock_guard<std::mutex> lock(groups_mutex_);
  auto [it, fresh] = groups_.emplace(std::move(key), std::move(g));
  return *it->second;
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
