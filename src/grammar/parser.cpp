#include "grammar/parser.h"

#include "core/check.h"

namespace hayate::grammar {

void Parser::start(StackPool& pool, ParseState& out) {
  out.clear();
  if (++epoch_ == 0) std::fill(stamp_.begin(), stamp_.end(), 0), epoch_ = 1;
  work_.clear();
  for (uint32_t s : g_.rules()[0].alts) work_.push_back(pool.intern(s, -1));
  close(pool, out);
}

void Parser::advance(StackPool& pool, const ParseState& in, uint8_t b, ParseState& out) {
  out.clear();
  if (++epoch_ == 0) std::fill(stamp_.begin(), stamp_.end(), 0), epoch_ = 1;
  work_.clear();
  const auto& el = g_.elements();
  const auto& sets = g_.byte_sets();
  for (int32_t t : in.tops) {
    const StackPool::Node n = pool[t];
    if (has_byte(sets[el[n.pos].arg], b)) work_.push_back(pool.intern(n.pos + 1, n.parent));
  }
  close(pool, out);
}

// Expands the nodes in work_ until every stack top is on a kBytes position.
// Without left recursion (rejected at compile) this terminates; the step
// limit is a safety net that turns a surprise into an Error.
void Parser::close(StackPool& pool, ParseState& out) {
  const auto& el = g_.elements();
  const size_t limit = g_.limits().max_closure_steps;
  size_t steps = 0;
  while (!work_.empty()) {
    const int32_t id = work_.back();
    work_.pop_back();
    if (!first_visit(id)) continue;
    HAYATE_CHECK(++steps <= limit, "grammar: a parser step took more than ", limit, " expansions");
    const StackPool::Node n = pool[id];
    const Grammar::Element e = el[n.pos];
    switch (e.op) {
      case Grammar::Op::kBytes:
        out.tops.push_back(id);
        break;
      case Grammar::Op::kRef: {
        // A call just before kEnd returns straight to our caller (tail call).
        const int32_t frame = el[n.pos + 1].op == Grammar::Op::kEnd ? n.parent
                                                                    : pool.intern(n.pos + 1, n.parent);
        for (uint32_t s : g_.rules()[e.arg].alts) work_.push_back(pool.intern(s, frame));
        break;
      }
      case Grammar::Op::kEnd:
        if (n.parent >= 0) {
          work_.push_back(n.parent);
        } else if (mode_ == Mode::kFull) {
          out.accepting = true;
        } else {
          const int64_t r = g_.static_return(g_.rule_of(n.pos));
          if (r >= 0) {
            work_.push_back(pool.intern(static_cast<uint32_t>(r), -1));
          } else if (r == Grammar::kReturnEndOfInput) {
            out.accepting = true;
          } else {
            out.popped = true;
          }
        }
        break;
    }
  }
}

}  // namespace hayate::grammar
