// The article's workloads: "same" repeats its prompt, "varied" cycles through
// eleven different prompts (bench/prompts/*.txt, compiled in), or a user file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hayate::bench {

struct Workload {
  std::string trial;                 // "same", "varied" or "file"
  std::string source;                // "builtin:same", "builtin:varied" or the file path
  std::vector<std::string> prompts;  // distinct prompts, in order
  int runs = 0;                      // timed requests; run i uses prompts[i % size]

  const std::string& prompt_for_run(int run_index) const;  // 0-based
};

// Splits text into prompts: one per line, "\r" stripped, blank lines skipped.
std::vector<std::string> split_prompt_lines(std::string_view text);

// `spec` is same, varied or a file path. A file holds one prompt per line, or
// a JSON array of strings, or {"prompts": [...]}. `runs` <= 0 picks the
// default: 10 for same (the article), one per prompt otherwise. Throws Error
// for an unreadable or empty file.
Workload make_workload(const std::string& spec, int runs);

}  // namespace hayate::bench
