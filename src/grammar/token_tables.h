// A grammar compiled for one vocabulary: for every kBytes position, the
// tokens whose acceptance does not depend on the stack below it (accepted
// or rejected there whatever the caller), precomputed once, and the few
// that do ("uncertain": matching them returns into a caller that the
// grammar does not fix statically), checked at run time against the real
// stack. This is xgrammar's adaptive token mask cache; rules with a single
// return position (helper rules, per-site schema rules) are followed
// statically, so most tokens are decided at compile time.
#pragma once

#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parser.h"
#include "grammar/vocab.h"

namespace hayate::grammar {

class TokenTables {
 public:
  TokenTables(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  std::shared_ptr<const Grammar> grammar_ptr() const { return grammar_; }

  // mask |= the tokens acceptable from `state` (a full-mode parser state in
  // pool), EOS ids included when the state may end. pool is scratch: nodes
  // made here are dropped before returning.
  void add_allowed(StackPool& pool, Parser& parser, const ParseState& state,
                   std::vector<uint32_t>& mask) const;

  struct Stats {
    size_t positions = 0, accepted = 0, uncertain = 0, bitset_positions = 0;
  };
  Stats stats() const;

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
  void build(uint32_t pos, Parser& parser, StackPool& pool);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<int32_t> table_of_;  // per position: index into tables_, -1 if not kBytes
  std::vector<Table> tables_;
};

}  // namespace hayate::grammar
