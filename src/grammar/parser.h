// The pushdown engine under GrammarMatcher and the mask precompute.
//
// A parser state is a set of stacks. Stacks are persistent: a node is
// (position, parent node), interned in a StackPool so equal stacks are one
// id and states sharing a suffix share its nodes. A stack's top always sits
// on a kBytes position (closure() expands references and ends), so
// advancing by one byte tests each top's byte set.
#pragma once

#include <algorithm>
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
  ByteSet follow{};           // popped: the bytes those callers may continue with
  bool live() const { return !tops.empty() || accepting || popped; }
  void clear() {
    tops.clear();
    accepting = popped = false;
    follow = ByteSet{};
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
  // A parser serves one pool: call this with the pool's truncate(n).
  void forget_from(size_t n) {
    if (memo_.size() > n) memo_.resize(n);
  }

 private:
  // The closure of one node, memoized by node id: states recur (inside a
  // string every character leads back to the same stacks), and a memo hit
  // replaces a dozen interning steps by one lookup.
  struct Closure {
    std::vector<int32_t> tops;
    bool accepting = false, popped = false, done = false;
    ByteSet follow{};
  };
  const Closure& closure_of(StackPool& pool, int32_t id);
  void close(StackPool& pool, ParseState& out);
  static bool first_visit(std::vector<uint32_t>& stamp, uint32_t epoch, int32_t id) {
    if (static_cast<size_t>(id) >= stamp.size()) stamp.resize(static_cast<size_t>(id) * 2 + 64, 0);
    if (stamp[static_cast<size_t>(id)] == epoch) return false;
    stamp[static_cast<size_t>(id)] = epoch;
    return true;
  }
  static void next_epoch(std::vector<uint32_t>& stamp, uint32_t& epoch) {
    if (++epoch == 0) std::fill(stamp.begin(), stamp.end(), 0), epoch = 1;
  }

  const Grammar& g_;
  Mode mode_;
  std::vector<int32_t> work_;
  std::vector<uint32_t> stamp_;  // per node id: the epoch of its last visit in close()
  uint32_t epoch_ = 0;
  std::vector<uint32_t> out_stamp_;  // per node id: already a top of advance()'s output
  uint32_t out_epoch_ = 0;
  std::vector<Closure> memo_;
};

}  // namespace hayate::grammar
