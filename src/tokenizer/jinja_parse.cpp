// Jinja subset: template lexer (with trim_blocks / lstrip_blocks, as
// transformers configures its environment) and recursive-descent parser.
#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "tokenizer/jinja_internal.h"
#include "tokenizer/utf8.h"

namespace hayate::jinja {

namespace {

[[noreturn]] void syntax(int line, const std::string& msg) {
  fail(cat("chat template: line ", line, ": ", msg));
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// ---- template lexer: text and tags

struct Item {
  enum Kind { kText, kExpr, kBlock } kind;
  std::string s;
  int line;
};

// End of the tag that starts at `open` (index of the closer), skipping
// string literals so that "%}" inside quotes does not end it.
size_t find_closer(const std::string& src, size_t from, const char* closer, int line) {
  char quote = 0;
  for (size_t i = from; i + 1 < src.size(); ++i) {
    char c = src[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == closer[0] && src[i + 1] == closer[1]) {
      return i;
    }
  }
  syntax(line, cat("unclosed tag (missing '", closer, "')"));
}

std::vector<Item> lex_template(std::string src) {
  // Jinja normalises newlines in the source and drops one trailing newline.
  std::string norm;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      norm += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      norm += src[i];
    }
  }
  src = std::move(norm);
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Item> items;
  size_t pos = 0;
  int line = 1;
  bool strip_front = false, line_starting = true;
  while (pos <= src.size()) {
    size_t open = std::string::npos;
    for (const char* o : {"{{", "{%", "{#"}) open = std::min(open, src.find(o, pos));
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (strip_front) {
      size_t k = 0;
      while (k < text.size() && is_ws(text[k])) ++k;
      text.erase(0, k);
    }
    if (open == std::string::npos) {
      if (!text.empty()) items.push_back({Item::kText, text, line});
      break;
    }
    char kind = src[open + 1];
    char mod = open + 2 < src.size() ? src[open + 2] : 0;
    if (mod == '-') {
      size_t k = text.size();
      while (k > 0 && is_ws(text[k - 1])) --k;
      text.resize(k);
    } else if (kind != '{' && mod != '+') {  // lstrip_blocks
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      bool blank = l_pos < text.size();
      for (size_t k = l_pos; k < text.size(); ++k) blank = blank && (text[k] == ' ' || text[k] == '\t');
      if (blank && (l_pos > 0 || line_starting)) text.resize(l_pos);
    }
    if (!text.empty()) items.push_back({Item::kText, text, line});
    for (size_t k = pos; k < open; ++k) line += src[k] == '\n';
    size_t body = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
    const char* closer = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t close = kind == '#' ? src.find("#}", body) : find_closer(src, body, closer, line);
    if (close == std::string::npos) syntax(line, "unclosed comment");
    char cmod = close > body ? src[close - 1] : 0;
    std::string content = src.substr(body, close - body - ((cmod == '-' || cmod == '+') ? 1 : 0));
    if (kind != '#') items.push_back({kind == '{' ? Item::kExpr : Item::kBlock, content, line});
    for (size_t k = open; k < close; ++k) line += src[k] == '\n';
    pos = close + 2;
    strip_front = cmod == '-';
    line_starting = false;
    if (!strip_front && kind != '{' && cmod != '+' && pos < src.size() && src[pos] == '\n') {
      ++pos;  // trim_blocks
      ++line;
      line_starting = true;
    }
    if (strip_front) {  // what '-' strips counts for line_starting too
      size_t k = pos;
      while (k < src.size() && is_ws(src[k])) ++k;
      line_starting = k > pos && src[k - 1] == '\n';
    }
  }
  return items;
}

// ---- expression tokens

struct Tok {
  enum Kind { kName, kInt, kFloat, kString, kOp, kEnd } kind;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

std::vector<Tok> lex_expr(const std::string& src, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < src.size()) {
    char c = src[i];
    if (is_ws(c)) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i;
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      out.push_back({Tok::kName, src.substr(b, i - b)});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = i;
      while (i < src.size() && (std::isdigit(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      bool is_float = i + 1 < src.size() && src[i] == '.' && std::isdigit(static_cast<unsigned char>(src[i + 1]));
      if (is_float) {
        ++i;
        while (i < src.size() && std::isdigit(static_cast<unsigned char>(src[i]))) ++i;
      }
      std::string num;
      for (size_t k = b; k < i; ++k)
        if (src[k] != '_') num += src[k];
      Tok t{is_float ? Tok::kFloat : Tok::kInt, num};
      try {
        if (is_float) t.f = std::stod(num);
        else t.i = std::stoll(num);
      } catch (const std::exception&) {
        syntax(line, cat("bad number '", num, "'"));
      }
      out.push_back(t);
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string s;
      ++i;
      for (;; ++i) {
        if (i >= src.size()) syntax(line, "unterminated string literal");
        char d = src[i];
        if (d == c) { ++i; break; }
        if (d != '\\' || i + 1 >= src.size()) { s += d; continue; }
        char e = src[++i];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case 'b': s += '\b'; break;
          case 'f': s += '\f'; break;
          case '\\': s += '\\'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          case 'u': {
            HAYATE_CHECK(i + 4 < src.size(), "chat template: line ", line, ": bad \\u escape");
            unsigned cp = 0;
            for (int k = 1; k <= 4; ++k) {
              char h = src[i + k];
              int v = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                      : std::isxdigit(static_cast<unsigned char>(h)) ? (std::tolower(h) - 'a' + 10) : -1;
              if (v < 0) syntax(line, "bad \\u escape");
              cp = cp * 16 + static_cast<unsigned>(v);
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = utf8::kReplacement;
            utf8::append(s, cp);
            i += 4;
            break;
          }
          default: s += '\\'; s += e;  // Python keeps unknown escapes
        }
      }
      out.push_back({Tok::kString, s});
      continue;
    }
    static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "<", ">"};
    bool found = false;
    for (const char* op : ops) {
      size_t n = std::char_traits<char>::length(op);
      if (src.compare(i, n, op) == 0) {
        out.push_back({Tok::kOp, op});
        i += n;
        found = true;
        break;
      }
    }
    if (!found) syntax(line, cat("unexpected character '", c, "'"));
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

// ---- expression parser (Jinja's precedence: or, and, not, comparisons,
// + -, ~, * / // %, unary -, filters and tests, postfix access)

// Nesting limit: the parser and evaluator recurse, so hostile templates
// must not be able to exhaust the stack.
constexpr int kMaxDepth = 200;

class ExprParser {
 public:
  ExprParser(const std::string& src, int line) : toks_(lex_expr(src, line)), line_(line) {}

  struct Guard {
    explicit Guard(ExprParser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) syntax(p_.line_, "expression nested too deeply");
    }
    ~Guard() { --p_.depth_; }
    ExprParser& p_;
  };

  ExprPtr expression() {
    Guard g(*this);
    ExprPtr e = or_expr();
    if (peek_name("if")) {
      ++pos_;
      auto c = make(Expr::kCond);
      ExprPtr cond = or_expr();
      ExprPtr alt;
      if (peek_name("else")) {
        ++pos_;
        alt = expression();
      } else {
        alt = make(Expr::kLiteral);
        alt->literal = Value::undefined("(inline if without else)");
      }
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(alt));
      return c;
    }
    return e;
  }

  bool at_end() const { return toks_[pos_].kind == Tok::kEnd; }
  bool peek_name(const char* n) const { return toks_[pos_].kind == Tok::kName && toks_[pos_].s == n; }
  bool peek_op(const char* o) const { return toks_[pos_].kind == Tok::kOp && toks_[pos_].s == o; }
  void expect_op(const char* o) {
    if (!peek_op(o)) syntax(line_, cat("expected '", o, "' but found '", toks_[pos_].s, "'"));
    ++pos_;
  }
  std::string name() {
    if (toks_[pos_].kind != Tok::kName) syntax(line_, cat("expected a name, found '", toks_[pos_].s, "'"));
    return toks_[pos_++].s;
  }
  void expect_end() {
    if (!at_end()) syntax(line_, cat("unexpected '", toks_[pos_].s, "'"));
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (peek_name("or")) {
      ++pos_;
      e = binary(Expr::kOr, "or", std::move(e), and_expr());
    }
    return e;
  }

 private:
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(Expr::Kind k, std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(k);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (peek_name("and")) {
      ++pos_;
      e = binary(Expr::kAnd, "and", std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    Guard g(*this);
    if (peek_name("not")) {
      ++pos_;
      auto e = make(Expr::kNot);
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<", ">", "<=", ">="})
        if (peek_op(o)) op = o;
      if (!op.empty()) {
        ++pos_;
      } else if (peek_name("in")) {
        ++pos_;
        op = "in";
      } else if (peek_name("not") && toks_[pos_ + 1].kind == Tok::kName && toks_[pos_ + 1].s == "in") {
        pos_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = binary(Expr::kBinary, op, std::move(e), math1());
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (peek_op("+") || peek_op("-")) {
      std::string op = toks_[pos_++].s;
      e = binary(Expr::kBinary, op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (peek_op("~")) {
      ++pos_;
      e = binary(Expr::kBinary, "~", std::move(e), math2());
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = pow();
    while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
      std::string op = toks_[pos_++].s;
      e = binary(Expr::kBinary, op, std::move(e), pow());
    }
    return e;
  }
  ExprPtr pow() {
    ExprPtr e = unary();
    while (peek_op("**")) {
      ++pos_;
      e = binary(Expr::kBinary, "**", std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary() {
    Guard g(*this);
    if (peek_op("-")) {
      ++pos_;
      auto e = make(Expr::kNeg);
      e->args.push_back(unary());
      return e;
    }
    if (peek_op("+")) {
      ++pos_;
      return unary();
    }
    return filters(postfix(primary()));
  }
  void call_args(Expr& e) {
    expect_op("(");
    while (!peek_op(")")) {
      if (toks_[pos_].kind == Tok::kName && toks_[pos_ + 1].kind == Tok::kOp && toks_[pos_ + 1].s == "=") {
        std::string k = name();
        ++pos_;
        e.kwargs.emplace_back(k, expression());
      } else {
        e.args.push_back(expression());
      }
      if (!peek_op(",")) break;
      ++pos_;
    }
    expect_op(")");
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (peek_op("|")) {
        ++pos_;
        auto f = make(Expr::kFilter);
        f->name = name();
        f->args.push_back(std::move(e));
        if (peek_op("(")) call_args(*f);
        e = std::move(f);
      } else if (peek_name("is")) {
        ++pos_;
        auto t = make(Expr::kTest);
        if (peek_name("not")) {
          ++pos_;
          t->negated = true;
        }
        t->name = name();
        t->args.push_back(std::move(e));
        if (peek_op("(")) {
          call_args(*t);
        } else if (toks_[pos_].kind == Tok::kString || toks_[pos_].kind == Tok::kInt ||
                   toks_[pos_].kind == Tok::kFloat ||
                   (toks_[pos_].kind == Tok::kName && !peek_name("and") && !peek_name("or") &&
                    !peek_name("else") && !peek_name("if") && !peek_name("in") && !peek_name("not") &&
                    !peek_name("is"))) {
          t->args.push_back(postfix(primary()));  // `is equalto 3`, `is sameas none`
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (peek_op(".")) {
        ++pos_;
        auto a = make(Expr::kAttr);
        if (toks_[pos_].kind == Tok::kInt) {
          a = make(Expr::kIndex);
          auto lit = make(Expr::kLiteral);
          lit->literal = Value::integer(toks_[pos_++].i);
          a->args.push_back(std::move(e));
          a->args.push_back(std::move(lit));
        } else {
          a->name = name();
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (peek_op("[")) {
        ++pos_;
        // x[i] or x[a:b:c] with any part omitted.
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
          if (peek_op("]")) break;
          if (peek_op(":")) {
            ++pos_;
            if (++colons > 2) syntax(line_, "too many ':' in a slice");
            continue;
          }
          if (parts[colons]) syntax(line_, "bad subscript");
          parts[colons] = expression();
        }
        expect_op("]");
        auto s = make(colons ? Expr::kSlice : Expr::kIndex);
        s->args.push_back(std::move(e));
        if (!colons) {
          if (!parts[0]) syntax(line_, "empty subscript");
          s->args.push_back(std::move(parts[0]));
        } else {
          for (auto& p : parts) {
            if (!p) {
              p = make(Expr::kLiteral);
              p->literal = Value::none();
            }
            s->args.push_back(std::move(p));
          }
        }
        e = std::move(s);
      } else if (peek_op("(")) {
        auto c = make(Expr::kCall);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Tok& t = toks_[pos_];
    auto lit = make(Expr::kLiteral);
    switch (t.kind) {
      case Tok::kString: {
        std::string s = toks_[pos_++].s;
        while (toks_[pos_].kind == Tok::kString) s += toks_[pos_++].s;  // "a" "b"
        lit->literal = Value::str(std::move(s));
        return lit;
      }
      case Tok::kInt: lit->literal = Value::integer(toks_[pos_++].i); return lit;
      case Tok::kFloat: lit->literal = Value::real(toks_[pos_++].f); return lit;
      case Tok::kName: {
        std::string n = toks_[pos_++].s;
        if (n == "true" || n == "True") lit->literal = Value::boolean(true);
        else if (n == "false" || n == "False") lit->literal = Value::boolean(false);
        else if (n == "none" || n == "None") lit->literal = Value::none();
        else {
          auto e = make(Expr::kName);
          e->name = n;
          return e;
        }
        return lit;
      }
      case Tok::kOp:
        if (t.s == "(") {
          ++pos_;
          ExprPtr first = expression();
          if (peek_op(",")) {  // a tuple: a list for our purposes
            auto l = make(Expr::kList);
            l->args.push_back(std::move(first));
            while (peek_op(",")) {
              ++pos_;
              if (peek_op(")")) break;
              l->args.push_back(expression());
            }
            first = std::move(l);
          }
          expect_op(")");
          return first;
        }
        if (t.s == "[") {
          ++pos_;
          auto l = make(Expr::kList);
          while (!peek_op("]")) {
            l->args.push_back(expression());
            if (!peek_op(",")) break;
            ++pos_;
          }
          expect_op("]");
          return l;
        }
        if (t.s == "{") {
          ++pos_;
          auto d = make(Expr::kDict);
          while (!peek_op("}")) {
            d->args.push_back(expression());
            expect_op(":");
            d->args.push_back(expression());
            if (!peek_op(",")) break;
            ++pos_;
          }
          expect_op("}");
          return d;
        }
        break;
      case Tok::kEnd: syntax(line_, "unexpected end of expression");
    }
    syntax(line_, cat("unexpected '", t.s, "'"));
  }

  std::vector<Tok> toks_;
  size_t pos_ = 0;
  int line_;
  int depth_ = 0;
};

// ---- statements

class Parser {
 public:
  explicit Parser(std::vector<Item> items) : items_(std::move(items)) {}

  Body body(const std::vector<std::string>& ends, std::string* ended_by, std::string* end_rest) {
    if (++depth_ > kMaxDepth) syntax(pos_ < items_.size() ? items_[pos_].line : 0, "blocks nested too deeply");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    Body out;
    while (pos_ < items_.size()) {
      const Item& it = items_[pos_++];
      auto st = std::make_unique<Stmt>();
      st->line = it.line;
      if (it.kind == Item::kText) {
        st->kind = Stmt::kText;
        st->text = it.s;
      } else if (it.kind == Item::kExpr) {
        st->kind = Stmt::kOutput;
        ExprParser p(it.s, it.line);
        st->expr = p.expression();
        p.expect_end();
      } else {
        std::string content = it.s;
        size_t b = content.find_first_not_of(" \t\n\r");
        if (b == std::string::npos) syntax(it.line, "empty block tag");
        size_t e = b;
        while (e < content.size() && (std::isalnum(static_cast<unsigned char>(content[e])) || content[e] == '_')) ++e;
        std::string kw = content.substr(b, e - b);
        std::string rest = content.substr(e);
        if (std::find(ends.begin(), ends.end(), kw) != ends.end()) {
          *ended_by = kw;
          *end_rest = rest;
          return out;
        }
        statement(*st, kw, rest, it.line);
      }
      out.push_back(std::move(st));
    }
    if (!ends.empty()) syntax(items_.empty() ? 0 : items_.back().line, cat("missing {% ", ends.back(), " %}"));
    return out;
  }

 private:
  void statement(Stmt& st, const std::string& kw, const std::string& rest, int line) {
    std::string ended, end_rest;
    if (kw == "if") {
      st.kind = Stmt::kIf;
      std::string cond_src = rest;
      for (;;) {
        ExprParser p(cond_src, line);
        ExprPtr cond = p.expression();
        p.expect_end();
        Body b = body({"elif", "else", "endif"}, &ended, &end_rest);
        st.branches.emplace_back(std::move(cond), std::move(b));
        if (ended == "elif") {
          cond_src = end_rest;
          continue;
        }
        if (ended == "else") {
          Body eb = body({"endif"}, &ended, &end_rest);
          st.branches.emplace_back(nullptr, std::move(eb));
        }
        return;
      }
    }
    if (kw == "for") {
      st.kind = Stmt::kFor;
      ExprParser p(rest, line);
      st.targets.push_back(p.name());
      while (p.peek_op(",")) {
        p.expect_op(",");
        st.targets.push_back(p.name());
      }
      if (!p.peek_name("in")) syntax(line, "expected 'in' in for loop");
      p.name();
      st.expr = p.or_expr();  // not expression(): a trailing `if` filters items
      if (p.peek_name("if")) {
        p.name();
        st.filter = p.or_expr();
      }
      if (p.peek_name("recursive")) syntax(line, "recursive for loops are not supported");
      p.expect_end();
      st.body = body({"else", "endfor"}, &ended, &end_rest);
      if (ended == "else") st.else_body = body({"endfor"}, &ended, &end_rest);
      return;
    }
    if (kw == "set") {
      st.kind = Stmt::kSet;
      ExprParser p(rest, line);
      st.targets.push_back(p.name());
      if (p.peek_op(".")) {
        p.expect_op(".");
        st.targets.push_back(p.name());
      }
      if (!p.peek_op("=")) syntax(line, "block {% set %} ... {% endset %} is not supported");
      p.expect_op("=");
      st.expr = p.expression();
      p.expect_end();
      return;
    }
    if (kw == "break" || kw == "continue") {
      st.kind = kw == "break" ? Stmt::kBreak : Stmt::kContinue;
      return;
    }
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      st.kind = Stmt::kBlock;
      st.body = body({"endgeneration"}, &ended, &end_rest);
      return;
    }
    syntax(line, cat("unsupported statement '{% ", kw, " %}'"));
  }

  std::vector<Item> items_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::string& source) {
  Parser p(lex_template(source));
  std::string ended, rest;
  return p.body({}, &ended, &rest);
}

}  // namespace hayate::jinja
