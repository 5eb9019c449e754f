// hayate tokenize: the tokenizer's front door.
//   --text TEXT        prints {"ids": [...]} (BOS added as HF's default)
//   --jsonl FILE       one JSON string per line in, one {"ids": ...} per line out
//   --decode 1,2,3     prints the decoded text
//   --no-special       adds no special tokens
#include <charconv>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/check.h"

namespace hayate {

namespace {

struct TokenizeArgs {
  ModelArgs model;
  std::string text;
  std::string jsonl;
  std::string decode;
  bool no_special = false;
  bool has_text = false;  // --text "" is a valid (empty) input
};

std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    HAYATE_CHECK(b != std::string::npos, "--decode: empty id in '", list, "'");
    item = item.substr(b, e - b + 1);
    int32_t id = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    HAYATE_CHECK(ec == std::errc() && p == item.data() + item.size(), "--decode: '", item,
                 "' is not an integer token id");
    ids.push_back(id);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::string ids_line(const std::vector<int32_t>& ids) {
  return nlohmann::json{{"ids", ids}}.dump();
}

void run(const TokenizeArgs& a) {
  int modes = a.has_text + !a.jsonl.empty() + !a.decode.empty();
  HAYATE_CHECK(modes == 1, "tokenize: give exactly one of --text, --jsonl or --decode");
  auto tok = load_tokenizer_only(a.model);
  bool special = !a.no_special;
  if (!a.decode.empty()) {
    std::cout << tok->decode(parse_ids(a.decode), /*skip_special_tokens=*/a.no_special) << "\n";
  } else if (a.has_text) {
    std::cout << ids_line(tok->encode(a.text, special)) << "\n";
  } else {
    std::ifstream in(a.jsonl, std::ios::binary);
    HAYATE_CHECK(in.good(), a.jsonl, ": cannot open");
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.empty() || line == "\r") continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      HAYATE_CHECK(!j.is_discarded() && j.is_string(), a.jsonl, ":", n,
                   ": each line must be one JSON string");
      std::cout << ids_line(tok->encode(j.get<std::string>(), special)) << "\n";
    }
  }
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "text to token ids (or --decode ids to text)");
  add_model_options(cmd, args->model);
  auto* text = cmd->add_option("--text", args->text, "text to encode");
  cmd->add_option("--jsonl", args->jsonl, "file with one JSON string per line");
  cmd->add_option("--decode", args->decode, "comma-separated ids to decode");
  cmd->add_flag("--no-special", args->no_special,
                "add no special tokens (with --decode: skip special tokens)");
  cmd->callback([args, text] {
    args->has_text = text->count() > 0;
    run(*args);
  });
}

}  // namespace hayate
