// The pushdown engine under GrammarMatcher and the mask precompute.
//
// A parser state is a set of stacks. Stacks are persistent: a node is
// (position, parent node), interned in a StackPool so equal stacks are one
// id and states sharing a suffix share its nodes. A stack's top always sits
// on a kBytes position (closure() expands references and ends), so
// advancing by one byte tests each top's byte set.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace hayate::grammar {

class StackPool {
 public:
  struct Node {
    uint32_t pos;
    int32_t parent;  // -1: the bottom
  };
  int32_t intern(uint32_t pos, int32_t parent) {
    const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent + 1);
    auto [it, fresh] = index_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
    if (fresh) nodes_.push_back({pos, parent});
    return it->second;
  }
  Node operator[](int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  // Drops the nodes made since size() was n (scratch work such as a mask).
  void truncate(size_t n) {
    for (size_t i = n; i < nodes_.size(); ++i)
      index_.erase((uint64_t{nodes_[i].pos} << 32) | static_cast<uint32_t>(nodes_[i].parent + 1));
    nodes_.resize(n);
  }
  void clear() {
    nodes_.clear();
    index_.clear();
  }

 private:
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct ParseState {
  std::vector<int32_t> tops;  // stack ids, each top on a kBytes position
  bool accepting = false;     // some stack is empty: the input may end here
  bool popped = false;        // local mode: some stack returned into an unknown caller
  bool live() const { return !tops.empty() || accepting || popped; }
  void clear() {
    tops.clear();
    accepting = popped = false;
  }
};

class Parser {
 public:
  // kFull: the bottom of a stack is the end of input. kLocal (the mask
  // precompute): below the bottom is an unknown caller; returning there
  // follows the rule's static return position when it has one, else sets
  // ParseState::popped.
  enum class Mode { kFull, kLocal };
  Parser(const Grammar& g, Mode mode) : g_(g), mode_(mode) {}

  // The state of a fresh parse at the root rule.
  void start(StackPool& pool, ParseState& out);
  // out = the stacks of `in` that accept byte b, advanced and closed.
  void advance(StackPool& pool, const ParseState& in, uint8_t b, ParseState& out);

 private:
  void close(StackPool& pool, ParseState& out);
  bool first_visit(int32_t id) {
    if (static_cast<size_t>(id) >= stamp_.size()) stamp_.resize(static_cast<size_t>(id) * 2 + 64, 0);
    if (stamp_[static_cast<size_t>(id)] == epoch_) return false;
    stamp_[static_cast<size_t>(id)] = epoch_;
    return true;
  }

  const Grammar& g_;
  Mode mode_;
  std::vector<int32_t> work_;
  std::vector<uint32_t> stamp_;  // per node id: the epoch of its last visit
  uint32_t epoch_ = 0;
};

}  // namespace hayate::grammar
