// Lowering a RuleSet into the flat IR, and the checks that make every
// compiled grammar safe to run (see grammar.h).
#include "grammar/grammar.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace hayate::grammar {

std::vector<Range> normalize(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
  std::vector<Range> out;
  for (Range r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) { utf8::append(out, char32_t(cp)); }

Expr lit(std::string bytes) {
  Expr e;
  e.kind = Expr::Kind::kLiteral;
  e.text = std::move(bytes);
  return e;
}

Expr cls(std::vector<Range> ranges, bool negate) {
  for (Range r : ranges) HAYATE_CHECK(r.lo <= r.hi && r.hi <= 0x10FFFF, "grammar: bad character range");
  ranges = normalize(std::move(ranges));
  if (negate) {
    std::vector<Range> inv;
    uint32_t next = 0;
    for (Range r : ranges) {
      if (r.lo > next) inv.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
    ranges = std::move(inv);
  }
  Expr e;
  e.kind = Expr::Kind::kClass;
  e.ranges = std::move(ranges);
  return e;
}

Expr ref(std::string name) {
  Expr e;
  e.kind = Expr::Kind::kRef;
  e.text = std::move(name);
  return e;
}

Expr seq(std::vector<Expr> items) {
  Expr e;
  e.kind = Expr::Kind::kSeq;
  e.items = std::move(items);
  return e;
}

Expr alt(std::vector<Expr> items) {
  Expr e;
  e.kind = Expr::Kind::kAlt;
  e.items = std::move(items);
  return e;
}

Expr rep(Expr item, int32_t min, int32_t max) {
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

namespace {

// Splits [lo, hi] (code points of one encoded length n) into runs whose
// UTF-8 encodings are products of byte ranges, e.g. U+0800..U+0FFF ->
// E0 [A0-BF] [80-BF].
void split_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<Range>>& out) {
  auto length = [](uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; };
  const int n = length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<Range> seqr;
  for (size_t k = 0; k < a.size(); ++k)
    seqr.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  out.push_back(std::move(seqr));
}

std::vector<std::vector<Range>> utf8_sequences(const std::vector<Range>& ranges) {
  static constexpr Range kLengths[] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF},
                                       {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  std::vector<std::vector<Range>> out;
  for (Range r : ranges)
    for (Range l : kLengths) {
      const uint32_t lo = std::max(r.lo, l.lo), hi = std::min(r.hi, l.hi);
      if (lo <= hi) split_same_length(lo, hi, out);
    }
  return out;
}

}  // namespace

class Lowering {
 public:
  Lowering(const RuleSet& rs, const Limits& limits) : rs_(rs) { g_.limits_ = limits; }

  Grammar run() {
    HAYATE_CHECK(!rs_.rules.empty(), "grammar: no rules");
    size_t root = 0;
    for (size_t i = 0; i < rs_.rules.size(); ++i)
      if (rs_.rules[i].first == rs_.root) root = i;
    // The root becomes rule 0; the others keep their order.
    order_.push_back(root);
    for (size_t i = 0; i < rs_.rules.size(); ++i)
      if (i != root) order_.push_back(i);
    for (size_t k = 0; k < order_.size(); ++k) {
      const std::string& name = rs_.rules[order_[k]].first;
      HAYATE_CHECK(names_.emplace(name, static_cast<uint32_t>(k)).second,
                   "grammar: rule '", name, "' is defined twice");
      new_rule(name);
    }
    for (size_t k = 0; k < order_.size(); ++k) pending_.push_back({Pending::kBody, static_cast<uint32_t>(k),
                                                                   &rs_.rules[order_[k]].second, -1});
    while (!pending_.empty()) {
      Pending p = pending_.front();
      pending_.pop_front();
      lower(p);
    }
    check();
    return std::move(g_);
  }

 private:
  struct Pending {
    enum Kind { kBody, kStar, kOpt } kind;
    uint32_t rule;
    const Expr* expr;  // kBody: the body; kStar/kOpt: the repeated item
    int64_t next;      // kOpt: the next optional rule of the chain, or -1
  };

  uint32_t new_rule(std::string name) {
    HAYATE_CHECK(g_.rules_.size() < g_.limits_.max_rules, "grammar: more than ",
                 g_.limits_.max_rules, " rules");
    g_.rules_.push_back({std::move(name), {}});
    return static_cast<uint32_t>(g_.rules_.size() - 1);
  }

  uint32_t helper(const char* what) {
    std::string name = g_.rules_[current_].name;
    name += '_';
    name += what;
    name += std::to_string(g_.rules_.size());
    return new_rule(std::move(name));
  }

  void push(Grammar::Op op, uint32_t arg) {
    HAYATE_CHECK(g_.elements_.size() < g_.limits_.max_elements, "grammar: more than ",
                 g_.limits_.max_elements, " positions");
    g_.elements_.push_back({op, arg});
    g_.rule_of_.push_back(current_);
  }

  void push_set(const ByteSet& s) {
    auto [it, fresh] = set_index_.emplace(s, static_cast<uint32_t>(g_.byte_sets_.size()));
    if (fresh) g_.byte_sets_.push_back(s);
    push(Grammar::Op::kBytes, it->second);
  }

  void begin_alt() { g_.rules_[current_].alts.push_back(static_cast<uint32_t>(g_.elements_.size())); }

  void lower(const Pending& p) {
    current_ = p.rule;
    if (p.kind == Pending::kBody) {
      const Expr& body = *p.expr;
      if (body.kind == Expr::Kind::kAlt) {
        HAYATE_CHECK(!body.items.empty(), "grammar: empty alternation in rule '",
                     g_.rules_[current_].name, "'");
        for (const Expr& a : body.items) {
          begin_alt();
          emit(a, 0);
          push(Grammar::Op::kEnd, 0);
        }
      } else {
        begin_alt();
        emit(body, 0);
        push(Grammar::Op::kEnd, 0);
      }
      return;
    }
    // kStar: item self | ""; kOpt: item next | "" (item alone at the end).
    begin_alt();
    emit(*p.expr, 0);
    if (p.kind == Pending::kStar) push(Grammar::Op::kRef, p.rule);
    if (p.kind == Pending::kOpt && p.next >= 0) push(Grammar::Op::kRef, static_cast<uint32_t>(p.next));
    push(Grammar::Op::kEnd, 0);
    begin_alt();
    push(Grammar::Op::kEnd, 0);
  }

  void emit(const Expr& e, int32_t depth) {
    HAYATE_CHECK(depth <= g_.limits_.max_depth, "grammar: expressions nested deeper than ",
                 g_.limits_.max_depth);
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        for (char c : e.text) {
          ByteSet s{};
          const auto b = static_cast<uint8_t>(c);
          s[b >> 6] |= uint64_t{1} << (b & 63);
          push_set(s);
        }
        return;
      case Expr::Kind::kBytes: {
        ByteSet s{};
        for (Range r : e.ranges)
          for (uint32_t b = r.lo; b <= r.hi && b < 256; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
        HAYATE_CHECK(s != ByteSet{}, "grammar: empty byte class");
        push_set(s);
        return;
      }
      case Expr::Kind::kClass: {
        HAYATE_CHECK(!e.ranges.empty(), "grammar: empty character class in rule '",
                     g_.rules_[current_].name, "'");
        if (e.ranges.back().hi < 0x80) {
          Expr b = e;
          b.kind = Expr::Kind::kBytes;
          emit(b, depth + 1);
          return;
        }
        // A rule of its own with one alternative per UTF-8 byte-range run;
        // one call site, so the mask precompute knows where it returns.
        Expr& body = owned_.emplace_back(alt({}));
        for (auto& run : utf8_sequences(e.ranges)) {
          std::vector<Expr> parts;
          for (Range r : run) {
            Expr b;
            b.kind = Expr::Kind::kBytes;
            b.ranges = {r};
            parts.push_back(std::move(b));
          }
          body.items.push_back(seq(std::move(parts)));
        }
        HAYATE_CHECK(!body.items.empty(), "grammar: character class matches only surrogates");
        const uint32_t r = helper("char");
        pending_.push_back({Pending::kBody, r, &body, -1});
        push(Grammar::Op::kRef, r);
        return;
      }
      case Expr::Kind::kRef: {
        uint32_t r;
        if (e.rule >= 0) {
          r = static_cast<uint32_t>(e.rule);
        } else {
          auto it = names_.find(e.text);
          HAYATE_CHECK(it != names_.end(), "grammar: undefined rule '", e.text, "'");
          r = it->second;
        }
        push(Grammar::Op::kRef, r);
        return;
      }
      case Expr::Kind::kSeq:
        for (const Expr& i : e.items) emit(i, depth + 1);
        return;
      case Expr::Kind::kAlt: {
        HAYATE_CHECK(!e.items.empty(), "grammar: empty alternation");
        if (e.items.size() == 1) return emit(e.items[0], depth + 1);
        const uint32_t r = helper("alt");
        pending_.push_back({Pending::kBody, r, &e, -1});
        push(Grammar::Op::kRef, r);
        return;
      }
      case Expr::Kind::kRepeat: {
        const int32_t lim = g_.limits_.max_repeat;
        HAYATE_CHECK(e.items.size() == 1, "grammar: repetition of nothing");
        HAYATE_CHECK(e.min >= 0 && (e.max < 0 || e.max >= e.min), "grammar: bad repetition {",
                     e.min, ",", e.max, "}");
        HAYATE_CHECK(e.min <= lim && e.max <= lim, "grammar: repetition bound over ", lim);
        for (int32_t i = 0; i < e.min; ++i) emit(e.items[0], depth + 1);
        if (e.max < 0) {
          const uint32_t r = helper("star");
          pending_.push_back({Pending::kStar, r, &e.items[0], -1});
          push(Grammar::Op::kRef, r);
        } else if (e.max > e.min) {
          // A chain of optional rules: o1 ::= item o2 | "", ..., ok ::= item | "".
          std::vector<uint32_t> chain;
          for (int32_t i = e.min; i < e.max; ++i) chain.push_back(helper("opt"));
          for (size_t i = 0; i < chain.size(); ++i)
            pending_.push_back({Pending::kOpt, chain[i], &e.items[0],
                                i + 1 < chain.size() ? int64_t{chain[i + 1]} : int64_t{-1}});
          push(Grammar::Op::kRef, chain[0]);
        }
        return;
      }
    }
  }

  void check();
  void compute_follow(const std::vector<char>& nullable);

  const RuleSet& rs_;
  Grammar g_;
  std::vector<size_t> order_;
  std::unordered_map<std::string, uint32_t> names_;
  std::deque<Pending> pending_;
  std::deque<Expr> owned_;
  struct SetHash {
    size_t operator()(const ByteSet& s) const { return s[0] ^ (s[1] * 31) ^ (s[2] * 131) ^ (s[3] * 1031); }
  };
  std::unordered_map<ByteSet, uint32_t, SetHash> set_index_;
  uint32_t current_ = 0;
};

void Lowering::check() {
  const auto& el = g_.elements_;
  const size_t nr = g_.rules_.size();
  using Op = Grammar::Op;
  // Nullable and productive rules, by fixpoint.
  std::vector<char> nullable(nr, 0), productive(nr, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r)
      for (uint32_t p : g_.rules_[r].alts) {
        bool nul = true, prod = true;
        for (uint32_t i = p; el[i].op != Op::kEnd; ++i) {
          if (el[i].op == Op::kBytes) nul = false;
          if (el[i].op == Op::kRef) {
            nul = nul && nullable[el[i].arg];
            prod = prod && productive[el[i].arg];
          }
        }
        if (nul && !nullable[r]) nullable[r] = 1, changed = true;
        if (prod && !productive[r]) productive[r] = 1, changed = true;
      }
  }
  // Rules reachable from the root must derive a finite string.
  std::vector<char> seen(nr, 0);
  std::vector<uint32_t> work{0};
  seen[0] = 1;
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    HAYATE_CHECK(productive[r], "grammar: rule '", g_.rules_[r].name,
                 "' derives no finite string (unbounded recursion)");
    for (uint32_t p : g_.rules_[r].alts)
      for (uint32_t i = p; el[i].op != Op::kEnd; ++i)
        if (el[i].op == Op::kRef && !seen[el[i].arg]) seen[el[i].arg] = 1, work.push_back(el[i].arg);
  }
  // Left recursion: a cycle of calls made before any byte is consumed.
  std::vector<std::vector<uint32_t>> left(nr);
  for (size_t r = 0; r < nr; ++r)
    for (uint32_t p : g_.rules_[r].alts)
      for (uint32_t i = p; el[i].op == Op::kRef; ++i) {
        left[r].push_back(el[i].arg);
        if (!nullable[el[i].arg]) break;
      }
  std::vector<char> color(nr, 0);  // 0 new, 1 on the DFS path, 2 done
  for (size_t s = 0; s < nr; ++s) {
    if (color[s]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(s), 0}};
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, k] = path.back();
      if (k == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = left[r][k++];
      HAYATE_CHECK(color[t] != 1, "grammar: rule '", g_.rules_[t].name,
                   "' is left-recursive (or repeats something that can match empty)");
      if (color[t] == 0) color[t] = 1, path.push_back({t, 0});
    }
  }
  // Static return positions (grammar.h), propagated along tail calls.
  std::vector<std::vector<int64_t>> ret(nr);
  std::vector<std::vector<uint32_t>> tail_callees(nr);
  auto add = [&](uint32_t r, int64_t v) {
    auto& s = ret[r];
    if (s.size() > 1 || std::find(s.begin(), s.end(), v) != s.end()) return false;
    s.push_back(v);
    return true;
  };
  std::vector<uint32_t> changed;
  if (add(0, Grammar::kReturnEndOfInput)) changed.push_back(0);
  for (uint32_t i = 0; i < el.size(); ++i) {
    if (el[i].op != Op::kRef) continue;
    if (el[i + 1].op == Op::kEnd) {
      tail_callees[g_.rule_of_[i]].push_back(el[i].arg);
    } else if (add(el[i].arg, i + 1)) {
      changed.push_back(el[i].arg);
    }
  }
  while (!changed.empty()) {
    const uint32_t s = changed.back();
    changed.pop_back();
    for (uint32_t r : tail_callees[s])
      for (int64_t v : std::vector<int64_t>(ret[s]))
        if (add(r, v)) changed.push_back(r);
  }
  g_.static_return_.resize(nr);
  for (size_t r = 0; r < nr; ++r)
    g_.static_return_[r] = ret[r].size() == 1 ? ret[r][0] : Grammar::kReturnMany;
  compute_follow(nullable);
}

// FIRST and FOLLOW byte sets, by fixpoint: follow(r) = the union over r's
// call sites of first(rest of the site's sequence), plus the caller's
// follow where that rest can be empty (a tail call's rest is empty).
void Lowering::compute_follow(const std::vector<char>& nullable) {
  const auto& el = g_.elements_;
  const size_t nr = g_.rules_.size();
  using Op = Grammar::Op;
  auto unite = [](ByteSet& a, const ByteSet& b) {
    bool changed = false;
    for (int k = 0; k < 4; ++k) {
      const uint64_t v = a[k] | b[k];
      changed = changed || v != a[k];
      a[k] = v;
    }
    return changed;
  };
  std::vector<ByteSet> first(nr, ByteSet{});
  // first of the sequence from pos; returns whether it can be empty.
  auto first_seq = [&](uint32_t pos, ByteSet& out) {
    for (uint32_t i = pos;; ++i) {
      if (el[i].op == Op::kEnd) return true;
      if (el[i].op == Op::kBytes) {
        unite(out, g_.byte_sets_[el[i].arg]);
        return false;
      }
      unite(out, first[el[i].arg]);
      if (!nullable[el[i].arg]) return false;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r)
      for (uint32_t p : g_.rules_[r].alts) {
        ByteSet f{};
        first_seq(p, f);
        changed = unite(first[r], f) || changed;
      }
  }
  g_.follow_.assign(nr, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 0; i < el.size(); ++i) {
      if (el[i].op != Op::kRef) continue;
      ByteSet f{};
      if (first_seq(i + 1, f)) unite(f, g_.follow_[g_.rule_of_[i]]);
      changed = unite(g_.follow_[el[i].arg], f) || changed;
    }
  }
}

Grammar compile(const RuleSet& rules, const Limits& limits) { return Lowering(rules, limits).run(); }

Grammar compile_choice(const std::vector<std::string>& choices, const Limits& limits) {
  HAYATE_CHECK(!choices.empty(), "choice: the list is empty");
  std::vector<Expr> alts;
  for (const auto& c : choices) {
    HAYATE_CHECK(!c.empty(), "choice: an empty string is not a choice");
    alts.push_back(lit(c));
  }
  RuleSet rs;
  rs.add("root", alt(std::move(alts)));
  return compile(rs, limits);
}

std::string Grammar::dump() const {
  std::string out;
  auto byte = [](uint32_t b) {
    const char* hex = "0123456789ABCDEF";
    if (b >= 0x21 && b < 0x7F && b != '\\' && b != ']' && b != '-' && b != '^')
      return std::string(1, static_cast<char>(b));
    std::string s = "\\x";
    s += hex[b >> 4];
    s += hex[b & 15];
    return s;
  };
  for (const Rule& r : rules_) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alts.size(); ++a) {
      out += a ? " |" : "";
      for (uint32_t i = r.alts[a]; elements_[i].op != Op::kEnd; ++i) {
        if (elements_[i].op == Op::kRef) {
          out += " " + rules_[elements_[i].arg].name;
          continue;
        }
        const ByteSet& s = byte_sets_[elements_[i].arg];
        out += " [";
        for (uint32_t b = 0; b < 256; ++b) {
          if (!has_byte(s, static_cast<uint8_t>(b))) continue;
          uint32_t e = b;
          while (e + 1 < 256 && has_byte(s, static_cast<uint8_t>(e + 1))) ++e;
          out += byte(b);
          if (e > b) {
            out += '-';
            out += byte(e);
          }
          b = e;
        }
        out += "]";
      }
      if (elements_[r.alts[a]].op == Op::kEnd) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace hayate::grammar
