// Text output: the per-run table and summary of one bench result, and the
// article's comparison table over several results (`hayate report`).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "bench/result.h"

namespace hayate::bench {

// A table of string cells; renders aligned text or GitHub markdown.
class Table {
 public:
  enum class Align { kLeft, kRight };
  void add_column(std::string header, Align align = Align::kRight);
  void add_row(std::vector<std::string> cells);  // throws Error on a wrong cell count
  std::string text() const;
  std::string markdown() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// "%.*f", or "-" when absent.
std::string fmt(std::optional<double> v, int decimals);

// Per-run table (run, seconds, prompt tokens, new tokens, tok/s, prefill,
// decode per token) and the summary lines; `r.summary` must be computed.
void print_bench(std::ostream& out, const BenchResult& r);

// The article's comparison: the setup (GPU, driver, CUDA, torch,
// transformers, model, dtype), then per trial one row per engine with the
// mean of runs 3..N and the speed-up over hf-eager and hf-compile of the
// same trial.
std::string comparison(const std::vector<BenchResult>& results, bool markdown);

// The setup lines alone ("GPU: ...").
std::vector<std::string> setup_lines(const std::vector<BenchResult>& results);

}  // namespace hayate::bench
