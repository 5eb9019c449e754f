// Chat templates rendered (and tokenized) as tokenizers.js renders them:
// the Llama 3 template shipped in tokenizer_config.json, the Llama 3.1
// Instruct template and ChatML (tests/tokenizer/data/*.jinja).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tok_test_util.h"

namespace hayate::test {
namespace {

TEST(Chat, RendersAndTokenizesLikeTokenizersJs) {
  std::string file = data_dir() + "/chats.json";
  auto cases = nlohmann::json::parse(slurp(file));
  ASSERT_GE(cases.size(), 10u);
  auto expected = json_lines(run_command("node " + oracle_dir() + "/chat_oracle.mjs " + file));
  ASSERT_EQ(expected.size(), cases.size());
  Tokenizer tok = Tokenizer::load(assets_llama3());
  const std::string shipped = tok.chat_template();
  ASSERT_FALSE(shipped.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::string name = c["template"].get<std::string>();
    tok.set_chat_template(name == "default" ? shipped : slurp(data_dir() + "/" + name));
    std::string vars = c.contains("vars") ? c["vars"].dump() : "";
    std::string text = tok.apply_chat_template_json(c["messages"].dump(),
                                                    c["add_generation_prompt"].get<bool>(), vars);
    EXPECT_EQ(text, expected[i]["text"].get<std::string>()) << "case " << i << " (" << name << ")";
    EXPECT_EQ(tok.encode(text, false), expected[i]["ids"].get<std::vector<int32_t>>())
        << "case " << i;
  }
}

// The families' templates (Qwen3's shipped one, Qwen2.5 Instruct's, ChatML,
// Mistral 7B Instruct v0.3's) on system prompts, multi-turn, tool
// definitions, tool calls and results, enable_thinking on and off, and
// continue_final_message, each with its family's tokenizer.
TEST(Chat, FamiliesRenderLikeHf) {
  const std::string file = data_dir() + "/chats_families.json";
  // ordered_json: tools and tool calls keep their key order (tojson writes it).
  auto cases = nlohmann::ordered_json::parse(slurp(file));
  ASSERT_GE(cases.size(), 15u);
  auto expected = json_lines(run_command("node " + oracle_dir() + "/chat_oracle.mjs " + file));
  ASSERT_EQ(expected.size(), cases.size());
  std::map<std::string, Tokenizer> toks;
  toks.emplace("qwen3", Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/qwen3"));
  toks.emplace("llama2", Tokenizer::load(llama2_dir()));
  std::map<std::string, std::string> shipped;
  for (auto& [name, t] : toks)
    if (t.has_chat_template()) shipped[name] = t.chat_template();
  ASSERT_FALSE(shipped["qwen3"].empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string tname = c["tokenizer"].get<std::string>();
    Tokenizer& tok = toks.at(tname);
    const std::string name = c["template"].get<std::string>();
    tok.set_chat_template(name == "default" ? shipped[tname] : slurp(data_dir() + "/" + name));
    const std::string vars = c.contains("vars") ? c["vars"].dump() : "";
    std::string text = tok.apply_chat_template_json(c["messages"].dump(),
                                                    c["add_generation_prompt"].get<bool>(), vars);
    if (c.value("continue_final_message", false))
      text = cut_after_final_message(text, c["messages"].back()["content"].get<std::string>());
    EXPECT_EQ(text, expected[i]["text"].get<std::string>()) << "case " << i << " (" << name << ")";
    EXPECT_EQ(tok.encode(text, false), expected[i]["ids"].get<std::vector<int32_t>>())
        << "case " << i;
  }
}

// transformers' layout: chat_template.jinja beside tokenizer.json replaces
// tokenizer_config.json's chat_template.
TEST(Chat, ChatTemplateJinjaBesideTheTokenizerWins) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / cat("hayate_chat_template_", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::create_symlink(fs::absolute(assets_llama3() + "/" + f), d / f);
  std::ofstream(d / "chat_template.jinja") << "{{ bos_token }}[{{ messages[0].content }}]";
  const Tokenizer t = Tokenizer::load(d.string());
  EXPECT_EQ(t.apply_chat_template({{"user", "x"}}, false), "<|begin_of_text|>[x]");
  fs::remove_all(d);
}

// A two-token byte-level BPE, for tests that only render templates (loading
// a real vocabulary costs seconds under the sanitizers).
constexpr const char* kTinyTokenizer = R"({"version": "1.0", "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"}, "added_tokens": [],
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})";

// A tokenizer_config.json whose chat_template is a list of named templates
// (default, tool_use, plain): the template picked as transformers picks it
// (tool_use with tools, an empty list included; default without; the
// chat_template argument naming one or being a template itself), rendered
// like @huggingface/jinja renders the oracle's own pick.
TEST(Chat, NamedTemplatesArePickedAndRenderedLikeHf) {
  const std::string file = data_dir() + "/chats_named.json";
  auto cases = nlohmann::ordered_json::parse(slurp(file));
  ASSERT_GE(cases.size(), 8u);
  auto expected = json_lines(run_command("node " + oracle_dir() + "/chat_oracle.mjs " + file));
  ASSERT_EQ(expected.size(), cases.size());
  const Tokenizer tok = Tokenizer::from_json(slurp(assets_llama3() + "/tokenizer.json"),
                                             slurp(data_dir() + "/named_templates_config.json"));
  EXPECT_EQ(tok.chat_template_names(), (std::vector<std::string>{"default", "plain", "tool_use"}));
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string vars = c.contains("vars") ? c["vars"].dump() : "";
    std::string text =
        tok.apply_chat_template_json(c["messages"].dump(), c["add_generation_prompt"].get<bool>(),
                                     vars, c.value("chat_template", std::string()));
    if (c.value("continue_final_message", false))
      text = cut_after_final_message(text, c["messages"].back()["content"].get<std::string>());
    EXPECT_EQ(text, expected[i]["text"].get<std::string>()) << "case " << i;
    EXPECT_EQ(tok.encode(text, false), expected[i]["ids"].get<std::vector<int32_t>>())
        << "case " << i;
  }
  // Without a template named default, a request without tools must name one.
  const auto config = nlohmann::json::parse(slurp(data_dir() + "/named_templates_config.json"));
  nlohmann::json no_default = config;
  no_default["chat_template"].erase(0);
  const Tokenizer nd = Tokenizer::from_json(kTinyTokenizer, no_default.dump());
  try {
    (void)nd.apply_chat_template({{"user", "x"}});
    FAIL() << "no default template, yet one was picked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none is named 'default': name one (plain, tool_use)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(nd.chat_template("plain"), config["chat_template"][2]["template"].get<std::string>());
  EXPECT_EQ(nd.chat_template({}, /*with_tools=*/true),
            config["chat_template"][1]["template"].get<std::string>());
  // A malformed list is a load error naming the field.
  nlohmann::json bad = config;
  bad["chat_template"][1].erase("template");
  try {
    (void)Tokenizer::from_json(kTinyTokenizer, bad.dump());
    FAIL() << "a chat_template entry without a template loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template list"), std::string::npos) << e.what();
  }
}

// transformers' file layout: chat_template.jinja is "default" and each
// additional_chat_templates/NAME.jinja a named template; together they
// replace tokenizer_config.json's list.
TEST(Chat, AdditionalChatTemplatesFolderNamesTemplates) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / cat("hayate_named_templates_", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d / "additional_chat_templates");
  std::ofstream(d / "tokenizer.json") << kTinyTokenizer;
  fs::create_symlink(fs::absolute(data_dir() + "/named_templates_config.json"),
                     d / "tokenizer_config.json");
  std::ofstream(d / "additional_chat_templates" / "tool_use.jinja") << "T{{ tools | length }}";
  std::ofstream(d / "additional_chat_templates" / "notes.txt") << "not a template";
  const std::string one = R"([{"role": "user", "content": "x"}])";
  {
    // No chat_template.jinja: the folder's templates alone, none of them default.
    const Tokenizer t = Tokenizer::load(d.string());
    EXPECT_EQ(t.chat_template_names(), std::vector<std::string>{"tool_use"});
    EXPECT_EQ(t.apply_chat_template_json(one, true, R"({"tools": [1, 2]})"), "T2");
    EXPECT_THROW(t.apply_chat_template_json(one, true), Error);
  }
  std::ofstream(d / "chat_template.jinja") << "D{{ messages[0].content }}";
  {
    const Tokenizer t = Tokenizer::load(d.string());
    EXPECT_EQ(t.chat_template_names(), (std::vector<std::string>{"default", "tool_use"}));
    EXPECT_EQ(t.apply_chat_template_json(one, true), "Dx");
    EXPECT_EQ(t.apply_chat_template_json(one, true, R"({"tools": []})"), "T0");
    EXPECT_EQ(t.apply_chat_template_json(one, true, R"({"tools": null})"), "Dx");
    EXPECT_EQ(t.apply_chat_template_json(one, true, R"({"tools": [1]})", "default"), "Dx");
  }
  fs::remove(d / "additional_chat_templates" / "tool_use.jinja");
  {
    // chat_template.jinja alone: one template, as before.
    const Tokenizer t = Tokenizer::load(d.string());
    EXPECT_TRUE(t.chat_template_names().empty());
    EXPECT_EQ(t.apply_chat_template_json(one, true, R"({"tools": [1]})"), "Dx");
  }
  fs::remove_all(d);
}

TEST(Chat, ContinueFinalMessageCutsAfterTheContent) {
  // The template kept the spacing: cut right after it; trimmed: after the stripped text.
  EXPECT_EQ(cut_after_final_message("<u>hi</u><a>Once </a>", "Once "), "<u>hi</u><a>Once ");
  EXPECT_EQ(cut_after_final_message("<u>hi</u><a>Once</a>", "Once  "), "<u>hi</u><a>Once");
  EXPECT_EQ(cut_after_final_message("x y x y", "y"), "x y x y");
  EXPECT_THROW(cut_after_final_message("<a>other</a>", "Once"), Error);
}

TEST(Chat, MessagesOverloadMatchesJsonOverload) {
  const Tokenizer& tok = llama3();
  std::vector<ChatMessage> msgs = {{"system", "sys"}, {"user", "こんにちは"}};
  std::string a = tok.apply_chat_template(msgs, true);
  std::string b = tok.apply_chat_template_json(
      R"([{"role":"system","content":"sys"},{"role":"user","content":"こんにちは"}])", true);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, tok.apply_chat_template(msgs, false));
}

TEST(Chat, TemplateErrorsAreClear) {
  Tokenizer tok = Tokenizer::load(assets_llama3());
  tok.set_chat_template("");
  EXPECT_THROW(tok.apply_chat_template({{"user", "x"}}), Error);
  tok.set_chat_template("{% macro m() %}{% endmacro %}");
  try {
    tok.apply_chat_template({{"user", "x"}});
    FAIL() << "macro accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("macro"), std::string::npos) << e.what();
  }
  tok.set_chat_template(slurp(data_dir() + "/llama3_1_instruct.jinja"));
  // The template raises when tools are given but there is no user message.
  try {
    tok.apply_chat_template_json(R"([{"role": "system", "content": "only a system message"}])",
                                 true, R"({"tools": [{"name": "t"}]})");
    FAIL() << "raise_exception ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no first user message"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hayate::test
