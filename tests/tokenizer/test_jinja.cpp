// Jinja subset: unsupported constructs fail with an Error naming them;
// tojson output parses back to the same JSON value.
#include "tok_test_util.h"
#include "tokenizer/jinja.h"

namespace hayate::test {
namespace {

std::string render(const std::string& src, const nlohmann::json& ctx = nlohmann::json::object()) {
  return jinja::render(src, ctx);
}

TEST(Jinja, UnsupportedConstructsAreNamed) {
  struct Case {
    const char* src;
    const char* mention;
  } cases[] = {
      {"{% macro f() %}x{% endmacro %}", "macro"},
      {"{% include 'x' %}", "include"},
      {"{{ x | wordwrap }}", "wordwrap"},
      {"{% if x is divisible %}{% endif %}", "divisible"},
      {"{{ unknown_fn(1) }}", "unknown_fn"},
      {"{{ 'a'.zfill(3) }}", "zfill"},
      {"{% if true %}", "endif"},
      {"{{ 'unterminated }}", "unclosed"},
      {"{% for x in [1] %}{% endif %}", "endif"},
      {"{{ raise_exception('custom message') }}", "custom message"},
      {"{{ undefined_thing.attr }}", "undefined_thing"},
      {"{{ 1 + 'a' }}", "unsupported operand"},
      {"{{ [1][0][0] }}", "subscript"},
  };
  for (const auto& c : cases) {
    try {
      render(c.src);
      ADD_FAILURE() << "accepted: " << c.src;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.mention), std::string::npos)
          << c.src << " -> " << e.what();
    }
  }
}

// Hostile templates end with an Error, not a stack overflow or an allocator
// failure: every case here crashed or ran out of memory without the limits.
TEST(Jinja, HostileTemplatesHitTheirLimits) {
  struct Case {
    const char* src;
    const char* mention;
  } cases[] = {
      // A list nested 200,000 deep (freeing it recursed once per level).
      {"{% set ns = namespace(x=[]) %}{% for i in range(200000) %}{% set ns.x = [ns.x] %}"
       "{% endfor %}{{ ns.x | length }}",
       "nests deeper"},
      {"{% set ns = namespace(x={}) %}{% for i in range(200000) %}{% set ns.x = {'a': ns.x} %}"
       "{% endfor %}",
       "nests deeper"},
      // A namespace that contains itself: a cycle printing would follow forever.
      {"{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns | tojson }}", "contains the namespace"},
      // Growth through replace, join, list +, |list and tojson(indent).
      {"{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
       "{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
       "too large"},
      {"{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
       "{% set ns.s = [ns.s, ns.s] | join(ns.s) %}{% endfor %}",
       "too large"},
      {"{% set ns = namespace(l=['xxxxxxxxxxxxxxxx']) %}{% for i in range(60) %}"
       "{% set ns.l = ns.l + ns.l %}{% endfor %}",
       "too large"},
      {"{% set ns = namespace(l=[], s='0123456789abcdef') %}{% for i in range(19) %}"
       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% for i in range(100) %}"
       "{% set ns.l = ns.l + [[ns.s ~ i]] %}{% endfor %}",
       "creates more than"},
      {"{% set ns = namespace(l=['a']) %}{% for i in range(40) %}"
       "{% set ns.l = (ns.l + ns.l) | list %}{% endfor %}",
       "too large"},
      {"{{ [[[1]]] | tojson(indent=2000000000) }}", "tojson"},
  };
  for (const auto& c : cases) {
    try {
      render(c.src);
      ADD_FAILURE() << "accepted: " << c.src;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.mention), std::string::npos)
          << c.src << " -> " << e.what();
    }
  }
}

TEST(Jinja, DeepContextValuesAreRefused) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  try {
    render("{{ v | length }}", {{"v", nlohmann::json::parse(deep)}});
    ADD_FAILURE() << "accepted a value nested 100,000 deep";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper"), std::string::npos) << e.what();
  }
  // Nesting within the bound still renders.
  std::string ok = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(render("{{ v | tojson }}", {{"v", nlohmann::json::parse(ok)}}), ok);
}

TEST(Jinja, TojsonRoundTrips) {
  nlohmann::json v = {{"name", "get_weather"},
                      {"parameters", {{"city", "東京"}, {"n", 3}, {"x", 1.5}, {"ok", true}, {"none", nullptr},
                                      {"list", {1, "two", nlohmann::json::array()}}, {"q", "a\"b\\c\n\u0001"}}}};
  for (const char* src : {"{{ v | tojson }}", "{{ v | tojson(indent=4) }}", "{{ v | tojson(2) }}"}) {
    std::string out = render(src, {{"v", v}});
    EXPECT_EQ(nlohmann::json::parse(out), v) << src;
    // ensure_ascii=False: non-ASCII stays as is.
    EXPECT_NE(out.find("東京"), std::string::npos);
  }
  std::string indented = render("{{ v | tojson(indent=4) }}", {{"v", v}});
  EXPECT_NE(indented.find("\n    \"name\": "), std::string::npos);
}

TEST(Jinja, RendersEveryMessageOfTheLlama31Template) {
  // Structural check on a long conversation: every content appears, trimmed,
  // between headers, in order.
  std::string tmpl = slurp(data_dir() + "/llama3_1_instruct.jinja");
  nlohmann::json msgs = nlohmann::json::array();
  for (int i = 0; i < 20; ++i)
    msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "  turn " + std::to_string(i) + " "}});
  std::string out = render(tmpl, {{"messages", msgs}, {"bos_token", "<|begin_of_text|>"}, {"add_generation_prompt", true}});
  size_t pos = 0;
  for (int i = 0; i < 20; ++i) {
    size_t hit = out.find("<|end_header_id|>\n\nturn " + std::to_string(i) + "<|eot_id|>", pos);
    ASSERT_NE(hit, std::string::npos) << i;
    pos = hit;
  }
  EXPECT_TRUE(out.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
}

}  // namespace
}  // namespace hayate::test
