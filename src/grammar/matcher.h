// One generation's position in a grammar: accepts bytes or tokens
// incrementally, rolls back, says whether the output may end here, and
// fills the token mask for the next step. Not thread-safe; the Grammar and
// TokenTables it shares are immutable and may serve many matchers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parser.h"
#include "grammar/token_tables.h"

namespace hayate::grammar {

class GrammarMatcher {
 public:
  // Bytes only (no vocabulary: no tokens, no masks).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  // Tokens and masks over tables' vocabulary. mask_cache: how many masks
  // of recently seen parser states to keep (a state repeats often, e.g.
  // inside a string); 0 disables it.
  explicit GrammarMatcher(std::shared_ptr<const TokenTables> tables, size_t mask_cache = 16);

  // Advances by all of bytes, as one step; returns false and changes
  // nothing when the grammar rejects them (or the matcher is terminated).
  bool accept_bytes(std::string_view bytes);
  // Advances by one token, as one step. An EOS id is accepted only where
  // the grammar may end, and terminates the matcher; other special tokens
  // are always rejected. Throws Error for an id outside the vocabulary.
  bool accept_token(int32_t id);
  // True when the input so far is a complete sentence of the grammar.
  bool can_end() const { return !terminated() && states_.back().accepting; }
  bool terminated() const { return terminated_.back(); }
  // Undoes the last n steps (n <= steps()).
  void rollback(size_t n);
  size_t steps() const { return states_.size() - 1; }
  void reset() { rollback(steps()); }

  // mask (ceil(V / 32) words, bit id % 32 of word id / 32) = the tokens
  // accept_token would accept now. Terminated: all zero.
  void fill_mask(std::vector<uint32_t>& mask);
  bool has_vocab() const { return tables_ != nullptr; }
  const TokenVocab& vocab() const;

 private:
  bool push_bytes(std::string_view bytes);
  std::string state_key(const ParseState& s) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTables> tables_;
  StackPool pool_;
  Parser parser_;
  std::vector<ParseState> states_;  // states_[0]: before any input
  std::vector<char> terminated_;
  ParseState scratch_[2];
  TrieWalk walk_;  // mask scratch, kept to avoid reallocating per step
  size_t cache_capacity_;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  std::deque<std::string> cache_order_;
};

}  // namespace hayate::grammar
