#include "bench/workload.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/prompts_data.h"
#include "core/check.h"

namespace hayate::bench {

const std::string& Workload::prompt_for_run(int run_index) const {
  HAYATE_CHECK(!prompts.empty(), "workload '", trial, "' has no prompts");
  HAYATE_CHECK(run_index >= 0, "negative run index ", run_index);
  return prompts[size_t(run_index) % prompts.size()];
}

std::vector<std::string> split_prompt_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(std::move(line));
    pos = end + 1;
  }
  return out;
}

static std::vector<std::string> prompts_from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HAYATE_CHECK(in, "--prompts: cannot read '", path, "' (expected same, varied or a file)");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  size_t first = text.find_first_not_of(" \t\r\n");
  bool looks_json = first != std::string::npos && (text[first] == '[' || text[first] == '{');
  if (!looks_json) return split_prompt_lines(text);

  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  HAYATE_CHECK(!j.is_discarded(), path, ": not valid JSON");
  if (j.is_object()) {
    HAYATE_CHECK(j.contains("prompts"), path, ": a JSON object needs a \"prompts\" array");
    j = j["prompts"];
  }
  HAYATE_CHECK(j.is_array(), path, ": expected a JSON array of strings");
  std::vector<std::string> out;
  for (const auto& p : j) {
    HAYATE_CHECK(p.is_string(), path, ": every prompt must be a string");
    HAYATE_CHECK(!p.get<std::string>().empty(), path, ": empty prompt");
    out.push_back(p.get<std::string>());
  }
  return out;
}

Workload make_workload(const std::string& spec, int runs) {
  Workload w;
  if (spec == "same") {
    w.trial = "same";
    w.source = "builtin:same";
    w.prompts = split_prompt_lines(data::kSamePrompts);
  } else if (spec == "varied") {
    w.trial = "varied";
    w.source = "builtin:varied";
    w.prompts = split_prompt_lines(data::kVariedPrompts);
  } else {
    w.trial = "file";
    w.source = spec;
    w.prompts = prompts_from_file(spec);
  }
  HAYATE_CHECK(!w.prompts.empty(), "--prompts ", spec, ": no prompts");
  if (runs > 0) {
    w.runs = runs;
  } else {
    w.runs = w.trial == "same" ? 10 : int(w.prompts.size());
  }
  return w;
}

}  // namespace hayate::bench
