// A grammar compiled for one vocabulary: for every kBytes position, the
// tokens whose acceptance does not depend on the stack below it (accepted
// or rejected there whatever the caller), precomputed once, and the few
// that do ("uncertain": matching them returns into a caller that the
// grammar does not fix statically), checked at run time against the real
// stack. This is xgrammar's adaptive token mask cache; rules with a single
// return position (helper rules, per-site schema rules) are followed
// statically, so most tokens are decided at compile time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parser.h"
#include "grammar/vocab.h"

namespace hayate::grammar {

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
  Verdict next(const std::string& t, size_t lcp, Parser& parser, StackPool& pool);
};

class TokenTables {
 public:
  // kEager builds every position's table now (the compile cost, paid once
  // per grammar); kLazy builds each on its first use by a mask (thread-safe),
  // which is cheaper when a generation visits few of the positions.
  enum class Build { kEager, kLazy };
  // deadline (kEager): building past it throws an Error saying how far it
  // got, so a grammar whose tables would take too long is refused instead of
  // holding its caller (the server's compile time limit).
  TokenTables(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
              Build build = Build::kEager,
              std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  std::shared_ptr<const Grammar> grammar_ptr() const { return grammar_; }

  // mask |= the tokens acceptable from `state` (a full-mode parser state in
  // pool), EOS ids included when the state may end. The stacks made while
  // checking uncertain tokens stay in pool (with parser's closure memo):
  // the next steps meet the same ones, and interning bounds the growth.
  void add_allowed(StackPool& pool, Parser& parser, TrieWalk& scratch, const ParseState& state,
                   std::vector<uint32_t>& mask) const;

  struct Stats {
    size_t positions = 0, accepted = 0, uncertain = 0, bitset_positions = 0;
  };
  Stats stats() const;  // over the tables built so far

 private:
  struct Uncertain {
    int32_t sorted_index;  // into vocab().sorted()
    uint16_t lcp;          // common prefix with the previous uncertain token
  };
  struct Table {
    std::vector<int32_t> accepted;       // ids, when few
    std::vector<uint32_t> accepted_bits; // a bitset, when many
    std::vector<Uncertain> uncertain;
  };
  const Table& table(uint32_t pos) const;
  // The union of several positions' tables, made on first use.
  const Table& group_table(const std::vector<uint32_t>& positions) const;
  void build(uint32_t pos, Table& table) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<int32_t> table_of_;  // per position: index into tables_, -1 if not kBytes
  mutable std::vector<Table> tables_;
  std::unique_ptr<std::once_flag[]> built_;  // per table
  mutable std::mutex groups_mutex_;
  mutable std::unordered_map<std::string, std::unique_ptr<Table>> groups_;  // by position set
};

}  // namespace hayate::grammar
