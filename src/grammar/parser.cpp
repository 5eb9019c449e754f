#include "grammar/parser.h"

#include "core/check.h"

namespace hayate::grammar {

void Parser::start(StackPool& pool, ParseState& out) {
  out.clear();
  next_epoch(stamp_, epoch_);
  work_.clear();
  for (uint32_t s : g_.rules()[0].alts) work_.push_back(pool.intern(s, -1));
  close(pool, out);
}

const Parser::Closure& Parser::closure_of(StackPool& pool, int32_t id) {
  const auto i = static_cast<size_t>(id);
  if (i < memo_.size() && memo_[i].done) return memo_[i];
  ParseState st;
  next_epoch(stamp_, epoch_);
  work_.clear();
  work_.push_back(id);
  close(pool, st);
  if (i >= memo_.size()) memo_.resize(std::max(i + 1, pool.size()));
  memo_[i] = {std::move(st.tops), st.accepting, st.popped, true, st.follow};
  return memo_[i];
}

void Parser::advance(StackPool& pool, const ParseState& in, uint8_t b, ParseState& out) {
  out.clear();
  next_epoch(out_stamp_, out_epoch_);
  const auto& el = g_.elements();
  const auto& sets = g_.byte_sets();
  for (int32_t t : in.tops) {
    const StackPool::Node n = pool[t];
    if (!has_byte(sets[el[n.pos].arg], b)) continue;
    const Closure& c = closure_of(pool, pool.intern(n.pos + 1, n.parent));
    for (int32_t top : c.tops)
      if (first_visit(out_stamp_, out_epoch_, top)) out.tops.push_back(top);
    out.accepting = out.accepting || c.accepting;
    out.popped = out.popped || c.popped;
    for (int k = 0; k < 4; ++k) out.follow[k] |= c.follow[k];
  }
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
    if (!first_visit(stamp_, epoch_, id)) continue;
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
            const ByteSet& f = g_.follow(g_.rule_of(n.pos));
            for (int k = 0; k < 4; ++k) out.follow[k] |= f[k];
          }
        }
        break;
    }
  }
}

}  // namespace hayate::grammar
